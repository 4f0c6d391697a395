import type { Logger } from './logger.js';

/**
 * A child logger made on first use. A gateway holds one per session, and most
 * sessions never log past "connected": a real pino child for each would be
 * memory spent for nothing.
 */
export class LazyChildLogger implements Logger {
  private real: Logger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Record<string, unknown>,
  ) {}

  private get target(): Logger {
    return (this.real ??= this.parent.child(this.bindings));
  }

  // Methods, not arrow fields: five closures per session would cost more than the child.
  trace(obj: unknown, msg?: string): void {
    this.target.trace(obj, msg);
  }
  debug(obj: unknown, msg?: string): void {
    this.target.debug(obj, msg);
  }
  info(obj: unknown, msg?: string): void {
    this.target.info(obj, msg);
  }
  warn(obj: unknown, msg?: string): void {
    this.target.warn(obj, msg);
  }
  error(obj: unknown, msg?: string): void {
    this.target.error(obj, msg);
  }

  child(bindings: Record<string, unknown>): Logger {
    return this.target.child(bindings);
  }
}

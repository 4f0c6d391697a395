import type { Logger } from './logger.js';

type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
/** pino's `isLevelEnabled`, when the parent has it. */
type LevelAware = Logger & { isLevelEnabled?: (level: Level) => boolean };

/**
 * A child logger (`{ [key]: value }` bound) made on first use. A gateway holds
 * one per session, and most sessions log nothing their logger's level lets
 * through: a real pino child for each would be memory spent for nothing. So a
 * line below the parent's level is dropped without making the child.
 */
export class LazyChildLogger implements Logger {
  private real: Logger | undefined;

  constructor(
    private readonly parent: LevelAware,
    private readonly key: string,
    private readonly value: string,
  ) {}

  private target(level: Level): Logger | undefined {
    if (this.real) return this.real;
    if (this.parent.isLevelEnabled?.(level) === false) return undefined;
    return (this.real = this.parent.child({ [this.key]: this.value }));
  }

  // Methods, not arrow fields: five closures per session would cost more than the child.
  trace(obj: unknown, msg?: string): void {
    this.target('trace')?.trace(obj, msg);
  }
  debug(obj: unknown, msg?: string): void {
    this.target('debug')?.debug(obj, msg);
  }
  info(obj: unknown, msg?: string): void {
    this.target('info')?.info(obj, msg);
  }
  warn(obj: unknown, msg?: string): void {
    this.target('warn')?.warn(obj, msg);
  }
  error(obj: unknown, msg?: string): void {
    this.target('error')?.error(obj, msg);
  }

  child(bindings: Record<string, unknown>): Logger {
    return (this.real ??= this.parent.child({ [this.key]: this.value })).child(bindings);
  }
}

import type { Logger } from './logger.js';

type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
/** pino's `isLevelEnabled`, when the parent has it. */
type LevelAware = Logger & { isLevelEnabled?: (level: Level) => boolean };

interface Origin {
  readonly parent: LevelAware;
  readonly key: string;
}

/** The origin the last logger was made with: the next one made with the same shares it. */
let lastOrigin: Origin | undefined;

function originOf(parent: LevelAware, key: string): Origin {
  const last = lastOrigin;
  if (last?.parent === parent && last.key === key) return last;
  return (lastOrigin = { parent, key });
}

/**
 * A child logger (`{ [key]: value }` bound) made on first use. A gateway holds
 * one per session, and most sessions log nothing their logger's level lets
 * through: a real pino child for each would be memory spent for nothing. So a
 * line below the parent's level is dropped without making the child.
 */
export class LazyChildLogger implements Logger {
  private real: Logger | undefined;
  /** The parent and the key, one object for every logger made with the same (see originOf). */
  private readonly origin: Origin;

  constructor(
    parent: LevelAware,
    key: string,
    private readonly value: string,
  ) {
    this.origin = originOf(parent, key);
  }

  private target(level: Level): Logger | undefined {
    if (this.real) return this.real;
    if (this.origin.parent.isLevelEnabled?.(level) === false) return undefined;
    return this.make();
  }

  private make(): Logger {
    return (this.real ??= this.origin.parent.child({ [this.origin.key]: this.value }));
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
    return this.make().child(bindings);
  }
}

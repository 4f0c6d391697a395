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
  /** The parent and the key, one object for every logger made with the same (see originOf). */
  private readonly origin: Origin;
  /** The value to bind until the child is made, then the child: one field for both. */
  private target: string | Logger;

  constructor(parent: LevelAware, key: string, value: string) {
    this.origin = originOf(parent, key);
    this.target = value;
  }

  private made(level: Level): Logger | undefined {
    const target = this.target;
    if (typeof target !== 'string') return target;
    if (this.origin.parent.isLevelEnabled?.(level) === false) return undefined;
    return this.make();
  }

  private make(): Logger {
    const target = this.target;
    if (typeof target !== 'string') return target;
    return (this.target = this.origin.parent.child({ [this.origin.key]: target }));
  }

  // Methods, not arrow fields: five closures per session would cost more than the child.
  trace(obj: unknown, msg?: string): void {
    this.made('trace')?.trace(obj, msg);
  }
  debug(obj: unknown, msg?: string): void {
    this.made('debug')?.debug(obj, msg);
  }
  info(obj: unknown, msg?: string): void {
    this.made('info')?.info(obj, msg);
  }
  warn(obj: unknown, msg?: string): void {
    this.made('warn')?.warn(obj, msg);
  }
  error(obj: unknown, msg?: string): void {
    this.made('error')?.error(obj, msg);
  }

  child(bindings: Record<string, unknown>): Logger {
    return this.make().child(bindings);
  }
}

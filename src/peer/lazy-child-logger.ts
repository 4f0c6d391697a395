import type { Logger } from './logger.js';

type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
/** pino's `isLevelEnabled`, when the parent has it. */
type LevelAware = Logger & { isLevelEnabled?: (level: Level) => boolean };

interface Origin {
  readonly parent: LevelAware;
  readonly key: string;
}

/**
 * A child logger (`{ [key]: value }` bound) made on first use. A gateway holds
 * one per session, and most sessions log nothing their logger's level lets
 * through: a real pino child for each would be memory spent for nothing. So a
 * line below the parent's level is dropped without making the child.
 *
 * Its one field is the value to bind until the child is made, then the child; the parent and
 * the key are its class's (see childLoggerOf).
 */
abstract class LazyChild implements Logger {
  /** The value to bind until the child is made, then the child: one field for both. */
  private target: string | Logger;

  constructor(value: string) {
    this.target = value;
  }

  protected abstract get origin(): Origin;

  private made(level: Level): Logger | undefined {
    const target = this.target;
    if (typeof target !== 'string') return target;
    if (this.origin.parent.isLevelEnabled?.(level) === false) return undefined;
    return this.make();
  }

  private make(): Logger {
    const target = this.target;
    if (typeof target !== 'string') return target;
    const { parent, key } = this.origin;
    return (this.target = parent.child({ [key]: target }));
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

/** The class of the loggers of one parent and key: they hold the origin on their prototype. */
type ChildLoggerClass = new (value: string) => Logger;

/** The classes of each parent's loggers, by key: one class per gateway, whatever the order sessions open in. */
const classes = new WeakMap<LevelAware, Map<string, ChildLoggerClass>>();

function classOf(parent: LevelAware, key: string): ChildLoggerClass {
  let byKey = classes.get(parent);
  if (!byKey) classes.set(parent, (byKey = new Map<string, ChildLoggerClass>()));
  let Class = byKey.get(key);
  if (!Class) {
    const origin: Origin = { parent, key };
    Class = class ChildLogger extends LazyChild {
      protected get origin(): Origin {
        return origin;
      }
    };
    byKey.set(key, Class);
  }
  return Class;
}

/**
 * A lazy child logger of `parent` binding `{ [key]: value }`, one field per logger: what a
 * gateway makes for each session.
 */
export function childLoggerOf(parent: LevelAware, key: string, value: string): Logger {
  return new (classOf(parent, key))(value);
}

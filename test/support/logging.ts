import type { Logger } from '../../src/peer/logger.js';

export interface LogRecord {
  level: 'trace' | 'debug' | 'info' | 'warn' | 'error';
  obj: unknown;
  msg: string | undefined;
  bindings: Record<string, unknown>;
}

/** A Logger that keeps every record (child loggers included) in `records`. */
export function captureLogger(): { logger: Logger; records: LogRecord[] } {
  const records: LogRecord[] = [];
  const make = (bindings: Record<string, unknown>): Logger => {
    const at =
      (level: LogRecord['level']) =>
      (obj: unknown, msg?: string): void => {
        records.push({ level, obj, msg, bindings });
      };
    return {
      trace: at('trace'),
      debug: at('debug'),
      info: at('info'),
      warn: at('warn'),
      error: at('error'),
      child: (more) => make({ ...bindings, ...more }),
    };
  };
  return { logger: make({}), records };
}

/** The records with message `msg`. */
export function logged(records: readonly LogRecord[], msg: string): LogRecord[] {
  return records.filter((r) => r.msg === msg);
}

/** Everything a record holds as text, errors included (message and stack), for leak checks. */
export function recordText(record: LogRecord): string {
  return JSON.stringify([record.msg, record.bindings, record.obj], (_key, value: unknown) => {
    if (value instanceof Error) return { ...value, message: value.message, stack: value.stack };
    return value;
  });
}

import type { LogFn, Logger } from '../../src/peer/logger.js';

export interface LogRecord {
  level: string;
  bindings: Record<string, unknown>;
  obj: unknown;
  msg: string | undefined;
}

/** Serialize a log record the way a JSON logger would see it, Error fields included. */
export function recordText(record: LogRecord): string {
  return JSON.stringify(record, (_key, value: unknown) =>
    value instanceof Error ? { ...value, message: value.message, stack: value.stack } : value,
  );
}

/** A Logger that keeps every call made on it and its children, in order. */
export class CaptureLogger implements Logger {
  readonly trace: LogFn;
  readonly debug: LogFn;
  readonly info: LogFn;
  readonly warn: LogFn;
  readonly error: LogFn;

  constructor(
    readonly records: LogRecord[] = [],
    private readonly bindings: Record<string, unknown> = {},
  ) {
    const at =
      (level: string): LogFn =>
      (obj, msg) =>
        void this.records.push({ level, bindings: this.bindings, obj, msg });
    this.trace = at('trace');
    this.debug = at('debug');
    this.info = at('info');
    this.warn = at('warn');
    this.error = at('error');
  }

  child(bindings: Record<string, unknown>): Logger {
    return new CaptureLogger(this.records, { ...this.bindings, ...bindings });
  }

  /** Every record as one string, to search for secrets. */
  text(): string {
    return this.records.map(recordText).join('\n');
  }

  withMessage(msg: string): LogRecord[] {
    return this.records.filter((r) => r.msg === msg);
  }
}

import type { LogFn, Logger } from '../../src/peer/logger.js';
import { createLogger } from '../../src/server/logger.js';

/**
 * The gateway's own createLogger (pino, with its redaction paths and its scrub) writing each line
 * it would print, at `level` and above, into `lines` instead of stdout.
 */
export function capturedPino(level: 'debug' | 'info' = 'info'): {
  logger: ReturnType<typeof createLogger>;
  lines: string[];
} {
  const lines: string[] = [];
  const logger = createLogger({ level }, { write: (line: string) => void lines.push(line) });
  return { logger, lines };
}

export interface LogRecord {
  level: 'trace' | 'debug' | 'info' | 'warn' | 'error';
  obj: unknown;
  msg: string | undefined;
  bindings: Record<string, unknown>;
}

/** A Logger that keeps every call made on it and its children, in order, in `records`. */
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
      (level: LogRecord['level']): LogFn =>
      (obj, msg) =>
        void this.records.push({ level, obj, msg, bindings: this.bindings });
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
    return logged(this.records, msg);
  }
}

/** A CaptureLogger and its records, for tests that only pass the logger on. */
export function captureLogger(): { logger: Logger; records: LogRecord[] } {
  const logger = new CaptureLogger();
  return { logger, records: logger.records };
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

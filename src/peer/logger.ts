/**
 * The logging surface the engine needs. A pino logger satisfies it; the
 * browser client defaults to the silent one so it pulls in nothing.
 */
export interface LogFn {
  (obj: unknown, msg?: string): void;
}

export interface Logger {
  trace: LogFn;
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
  child(bindings: Record<string, unknown>): Logger;
}

const noop: LogFn = () => undefined;

export const silentLogger: Logger = {
  trace: noop,
  debug: noop,
  info: noop,
  warn: noop,
  error: noop,
  child: () => silentLogger,
};

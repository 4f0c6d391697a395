// A process's stop on SIGTERM, SIGINT and SIGHUP: the first signal runs the shutdown (a gateway's
// drain, then whatever else the process holds) and exits 0, or 1 if it failed; a second signal
// exits 1 at once. Shared by the standalone server (wsrpc-gateway serve) and the demo. SIGHUP
// (its terminal closed, its session ended) would otherwise kill the process at once, its clients
// cut off without the drain's reconnect advice.
import type { Logger } from '../peer/logger.js';

export interface ShutdownOnSignals {
  /**
   * Run the shutdown now, as a signal would (e.g. when stdin ends); called while one runs, it
   * waits for that one (the shutdown's own end of stdin is no second signal).
   */
  readonly stop: (reason: string) => Promise<void>;
}

/**
 * Install handlers for `signals` that call `shutdown` once, then exit the process. The logger
 * is flushed before exiting when it can be (pino's `flush`).
 */
export function shutdownOnSignals(
  logger: Logger,
  shutdown: (reason: string) => Promise<void>,
  signals: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'],
): ShutdownOnSignals {
  let running: Promise<void> | undefined;
  const exit = (code: number): never => {
    (logger as { flush?: () => void }).flush?.();
    process.exit(code);
  };
  const stop = (reason: string): Promise<void> =>
    (running ??= (async () => {
      logger.info({ signal: reason }, 'shutting down');
      try {
        await shutdown(reason);
      } catch (err) {
        logger.error({ err }, 'shutdown failed');
        exit(1);
      }
      exit(0);
    })());
  const onSignal = (name: NodeJS.Signals): void => {
    if (running) {
      logger.warn({ signal: name }, 'second signal: exiting now');
      exit(1);
    }
    void stop(name);
  };
  for (const signal of signals) process.on(signal, onSignal);
  return { stop };
}

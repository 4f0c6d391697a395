import type { Logger } from '../peer/logger.js';
import { settledOrAfter } from '../peer/settled-or-after.js';
import type { UpgradeRequest } from './options.js';
import { UpgradeRejection } from './upgrade-rejection.js';

export type AuthenticateOutcome<C> =
  | { ok: true; context: C }
  | {
      ok: false;
      status: number;
      /** The hook's own words (an UpgradeRejection's message); undefined when the hook failed. */
      message: string | undefined;
      headers: Readonly<Record<string, string>> | undefined;
      /**
       * For the rejected-upgrades metric: refused by the hook, the hook itself failed (500), or
       * it did not settle within its time (503).
       */
      reason: 'unauthenticated' | 'auth-error' | 'auth-timeout';
    };

/**
 * Run the `authenticate` hook for any transport: its context, its UpgradeRejection as a
 * status, or, when it throws anything else, a 500 with the error logged (never sent). A hook
 * that has not settled after `timeoutMs` is given up on: 503, logged, and whatever it settles
 * with later is ignored.
 */
export async function runAuthenticate<C>(
  hook: ((request: UpgradeRequest) => C | Promise<C>) | undefined,
  request: UpgradeRequest,
  logger: Logger,
  timeoutMs: number,
  /** Told of the hook's run itself, which may go on after it was given up on. */
  running?: (run: Promise<unknown>) => void,
): Promise<AuthenticateOutcome<C>> {
  if (!hook) return { ok: true, context: undefined as C };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), timeoutMs);
  });
  try {
    // Through a promise, so a hook that throws synchronously fails like one that rejects.
    const run = Promise.resolve().then(() => hook(request));
    running?.(run);
    const context = await Promise.race([run, timedOut]);
    if (context === TIMED_OUT) {
      logger.warn({ timeoutMs }, 'authenticate hook did not settle in time: refused');
      hungRuns.set(request, run);
      return AUTH_TIMED_OUT;
    }
    return { ok: true, context };
  } catch (err) {
    if (err instanceof UpgradeRejection) {
      const { status, message, headers } = err;
      return { ok: false, status, message, headers, reason: 'unauthenticated' };
    }
    logger.error({ err }, 'authenticate hook failed');
    return { ok: false, status: 500, message: undefined, headers: undefined, reason: 'auth-error' };
  } finally {
    clearTimeout(timer);
  }
}

const TIMED_OUT = Symbol('timed out');

/**
 * A run of the hook that did not settle in time holds its place for at most this many
 * `authenticateTimeoutMs`, or until it settles: a connection's tokens are refused meanwhile
 * without running the hook again (identity.ts), and a connection being opened keeps its
 * admission slot (connection-intake.ts). At most one hung run per slot per such period.
 */
export const HOOK_HANG_RETRY_FACTOR = 10;

/** Requests whose run of the hook was given up on and may still be going (see releaseAdmission). */
const hungRuns = new WeakMap<UpgradeRequest, Promise<unknown>>();

/**
 * Let go of `request`'s admission slot (`release`) when no session took it. One whose run of the
 * hook was given up on (503) is held until that run settles, or for HOOK_HANG_RETRY_FACTOR ×
 * `timeoutMs` at most: what the hook holds counts in the connection limits, or an address could
 * start a hung run each time it may connect.
 */
export function releaseAdmission(
  request: UpgradeRequest,
  timeoutMs: number,
  release: () => void,
): void {
  const run = hungRuns.get(request);
  if (!run) return release();
  hungRuns.delete(request);
  settledOrAfter(run, HOOK_HANG_RETRY_FACTOR * timeoutMs, release);
}

/** The outcome of a hook that did not settle within its time: 503, try again in a second. */
export const AUTH_TIMED_OUT = {
  ok: false,
  status: 503,
  message: 'Authentication timed out',
  headers: { 'Retry-After': '1' },
  reason: 'auth-timeout',
} as const satisfies AuthenticateOutcome<unknown>;

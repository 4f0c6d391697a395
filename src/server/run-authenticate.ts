import type { Logger } from '../peer/logger.js';
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
      /** For the rejected-upgrades metric: refused by the hook, or the hook itself failed (500). */
      reason: 'unauthenticated' | 'auth-error';
    };

/**
 * Run the `authenticate` hook for any transport: its context, its UpgradeRejection as a
 * status, or, when it throws anything else, a 500 with the error logged (never sent).
 */
export async function runAuthenticate<C>(
  hook: ((request: UpgradeRequest) => C | Promise<C>) | undefined,
  request: UpgradeRequest,
  logger: Logger,
): Promise<AuthenticateOutcome<C>> {
  if (!hook) return { ok: true, context: undefined as C };
  try {
    return { ok: true, context: await hook(request) };
  } catch (err) {
    if (err instanceof UpgradeRejection) {
      const { status, message, headers } = err;
      return { ok: false, status, message, headers, reason: 'unauthenticated' };
    }
    logger.error({ err }, 'authenticate hook failed');
    return { ok: false, status: 500, message: undefined, headers: undefined, reason: 'auth-error' };
  }
}

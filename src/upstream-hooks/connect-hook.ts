import type { Logger } from '../peer/logger.js';
import { addressGroup } from '../server/address-group.js';
import type { UpgradeRequest } from '../server/options.js';
import { UpgradeRejection } from '../server/upgrade-rejection.js';
import type { Tracing } from '../tracing/tracing.js';
import { KeyedShares } from '../upstream/keyed-shares.js';
import type { JsonRpcHttpClient } from '../upstream/json-rpc-http-client.js';
import { failureOf, isRefusal, readConnectResult, refusalStatus } from './hook-answers.js';
import type { HookIdentity } from './hook-answers.js';
import { traceHeaders } from './hook-call.js';
import type { HookMetrics } from './hook-metrics.js';
import type { ConnectHookConfig } from './hooks-config.js';

/** The request headers a connect hook is shown; the others stay in the gateway. */
export const CONNECT_HEADERS = [
  'authorization',
  'cookie',
  'user-agent',
  'origin',
  'x-forwarded-for',
] as const;

/** Who connects when the hook failed and `onFailure` is `allow`. */
export const ANONYMOUS: HookIdentity = Object.freeze({ context: null, anonymous: true });

/** Seconds a client refused because the hook failed, or its address is busy, is told to wait. */
const RETRY_AFTER_SECONDS = '1';

/**
 * The gateway's `authenticate` hook as a call of `wsrpc.connect` on the upstream, at every phase
 * (upgrade, in-band, refresh). Its result becomes the session's context; -32010 or -32004 refuse
 * (401, 403, or the 4xx of `data.status`; in-band and on refresh the gateway answers -32010).
 * No answer in time, a transport failure, any other error or a malformed result: 503 with
 * Retry-After (`onFailure: refuse`), or an anonymous context (`allow`). At most
 * `maxConcurrentPerAddress` calls are in flight for one client address (grouped as per-address
 * connection limits are): past it that address is refused 429 with Retry-After without a call,
 * so one address cannot take the upstream's maxConcurrent and have everyone else refused; and an
 * address with a connect in progress is refused the same way the upstream's last
 * `reservedForNewCallers` slots, so many addresses at their full share cannot either.
 */
export function connectHook(
  config: ConnectHookConfig,
  client: JsonRpcHttpClient,
  deps: { logger: Logger; tracing: Tracing; metrics: HookMetrics },
): (request: UpgradeRequest) => Promise<HookIdentity> {
  const failed = (why: Record<string, unknown>): HookIdentity => {
    deps.metrics.outcome('connect', 'failed');
    deps.logger.warn({ ...why, onFailure: config.onFailure }, 'connect hook failed');
    if (config.onFailure === 'allow') return ANONYMOUS;
    throw new UpgradeRejection(503, 'Connect hook unavailable', {
      'retry-after': RETRY_AFTER_SECONDS,
    });
  };
  const perAddress = new KeyedShares(config.maxConcurrentPerAddress);
  const decide = async (request: UpgradeRequest): Promise<HookIdentity> => {
    let result: unknown;
    try {
      result = await tracedConnect(request);
    } catch (err) {
      if (!isRefusal(err)) return failed(failureOf(err));
      deps.metrics.outcome('connect', 'refused');
      throw new UpgradeRejection(refusalStatus(err), err.message);
    }
    const identity = readConnectResult(result);
    if (typeof identity === 'string') return failed({ reason: `malformed result: ${identity}` });
    deps.metrics.outcome('connect', 'accepted');
    return identity;
  };
  return async (request) => {
    // No address (stdio): nothing to share out.
    if (request.remoteAddress === undefined) return decide(request);
    const group = addressGroup(request.remoteAddress);
    // The upstream's last slots are kept for addresses with no connect in progress
    // (reservedForNewCallers), so addresses at their full share cannot refuse everyone else.
    const busy =
      perAddress.of(group) > 0 && !client.admitsCallersCalling
        ? 'Connects in progress from this address: the last slots are kept for other addresses'
        : perAddress.take(group)
          ? undefined
          : 'Too many connects in progress from this address';
    if (busy !== undefined) {
      deps.metrics.outcome('connect', 'busy');
      throw new UpgradeRejection(429, busy, { 'retry-after': RETRY_AFTER_SECONDS });
    }
    try {
      return await decide(request);
    } finally {
      perAddress.give(group);
    }
  };

  function tracedConnect(request: UpgradeRequest): Promise<unknown> {
    const headers: Record<string, string> = {};
    for (const name of CONNECT_HEADERS) {
      const value = request.headers[name];
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    }
    const params = {
      transport: request.transport,
      remoteAddress: request.remoteAddress ?? null,
      headers,
      query: Object.fromEntries(request.query),
      token: request.token ?? null,
      phase: request.phase,
    };
    return deps.tracing.span(
      `upstream.request ${client.name}`,
      { 'wsrpc.upstream': client.name, 'rpc.method': 'wsrpc.connect' },
      undefined,
      (span) =>
        client.call('wsrpc.connect', params, {
          timeoutMs: config.timeoutMs,
          headers: traceHeaders(span),
        }),
    );
  }
}

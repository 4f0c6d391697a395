import { ErrorCode } from '../protocol/error-codes.js';
import { JsonRpcError } from '../protocol/errors.js';

/** How an upstream request failed without a JSON-RPC answer from the upstream. */
export type UpstreamFailure = 'unavailable' | 'timeout' | 'busy';

const codeOf: Readonly<Record<UpstreamFailure, number>> = {
  unavailable: ErrorCode.UpstreamUnavailable,
  timeout: ErrorCode.UpstreamTimeout,
  busy: ErrorCode.UpstreamBusy,
};

/** The bound a -32013 names: the option it is (`maxConcurrent`, ...) and its value. */
export interface BusyBound {
  readonly bound: string;
  readonly limit: number;
}

/**
 * A transport failure of an upstream request: -32011, -32012 or -32013 with
 * `data: { upstream, reason }` (-32013 adds the `bound` and `limit` it met, a request the
 * gateway cannot write the `limit` it would pass). `reason` is a short text that never names
 * the upstream's address; `detail` (the underlying error's message, which may) is logged, and
 * added to `data` only with `exposeErrorDetails`. `unsent` marks a request that never left the
 * gateway (connection refused): safe to send again on any route.
 */
export class UpstreamError extends JsonRpcError {
  override name = 'UpstreamError';

  constructor(
    readonly failure: UpstreamFailure,
    readonly upstream: string,
    readonly reason: string,
    readonly detail?: string,
    readonly unsent = false,
    bound?: Partial<BusyBound>,
  ) {
    super(codeOf[failure], undefined, { upstream, reason, ...bound });
  }

  /**
   * -32013: `limit` calls in flight under the bound its option `bound` names, so a client can
   * tell its own shares (`maxConcurrentPerSession`, `maxConcurrentPerUser`) from its address's
   * (`maxConcurrentPerAddress`) and the upstream's (`maxConcurrent`).
   */
  static busy(upstream: string, reason: string, bound: string, limit: number): UpstreamError {
    return new UpstreamError('busy', upstream, reason, undefined, false, { bound, limit });
  }

  /**
   * -32011 for a request the gateway cannot write (its session's identity does not fit a
   * header), never sent; `limit`, when given, is the bound it would pass.
   */
  static unsendable(upstream: string, reason: string, limit?: number): UpstreamError {
    return new UpstreamError(
      'unavailable',
      upstream,
      reason,
      undefined,
      true,
      limit === undefined ? undefined : { limit },
    );
  }

  /** The same error with `detail` in its data (GatewayOptions.exposeErrorDetails). */
  withDetail(): UpstreamError | JsonRpcError {
    if (this.detail === undefined) return this;
    return new JsonRpcError(this.code, this.message, {
      ...(this.data as Record<string, unknown>),
      detail: this.detail,
    });
  }
}

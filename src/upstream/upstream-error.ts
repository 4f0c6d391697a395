import { ErrorCode } from '../protocol/error-codes.js';
import { JsonRpcError } from '../protocol/errors.js';

/** How an upstream request failed without a JSON-RPC answer from the upstream. */
export type UpstreamFailure = 'unavailable' | 'timeout' | 'busy';

const codeOf: Readonly<Record<UpstreamFailure, number>> = {
  unavailable: ErrorCode.UpstreamUnavailable,
  timeout: ErrorCode.UpstreamTimeout,
  busy: ErrorCode.UpstreamBusy,
};

/**
 * A transport failure of an upstream request: -32011, -32012 or -32013 with
 * `data: { upstream, reason }`. `reason` is a short text that never names the upstream's
 * address; `detail` (the underlying error's message, which may) is logged, and added to `data`
 * only with `exposeErrorDetails`. `unsent` marks a request that never left the gateway
 * (connection refused): safe to send again on any route.
 */
export class UpstreamError extends JsonRpcError {
  override name = 'UpstreamError';

  constructor(
    readonly failure: UpstreamFailure,
    readonly upstream: string,
    readonly reason: string,
    readonly detail?: string,
    readonly unsent = false,
  ) {
    super(codeOf[failure], undefined, { upstream, reason });
  }

  /** The same error with `detail` in its data (GatewayOptions.exposeErrorDetails). */
  withDetail(): UpstreamError | JsonRpcError {
    if (this.detail === undefined) return this;
    return new JsonRpcError(this.code, this.message, {
      upstream: this.upstream,
      reason: this.reason,
      detail: this.detail,
    });
  }
}

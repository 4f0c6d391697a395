import { ErrorCode } from '../protocol/error-codes.js';

/**
 * What a refused TCP or stdio connection is told before it is closed: there is no HTTP
 * status to carry the refusal, so it is one JSON-RPC error line with id null, its data
 * holding the HTTP status a WebSocket upgrade would have got.
 */
export function streamRefusal(status: number, message: string): string {
  const code =
    status === 401 || status === 403
      ? ErrorCode.Unauthorized
      : status >= 500 && status !== 503
        ? ErrorCode.InternalError
        : status === 503 && /shutting down/i.test(message)
          ? ErrorCode.ShuttingDown
          : status === 503 && /broker unavailable/i.test(message)
            ? ErrorCode.BrokerUnavailable
            : ErrorCode.ServerBusy;
  return `${JSON.stringify({ jsonrpc: '2.0', error: { code, message, data: { status } }, id: null })}\n`;
}

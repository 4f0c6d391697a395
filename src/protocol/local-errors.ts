/**
 * Errors that never go on the wire: they describe what happened to a call on
 * this side (the connection closed, the call timed out, the caller cancelled).
 */
export class RpcLocalError extends Error {
  override name = 'RpcLocalError';
}

/** The connection closed (or was never open) before the call settled. */
export class ConnectionClosedError extends RpcLocalError {
  override name = 'ConnectionClosedError';
  constructor(
    message = 'Connection closed',
    readonly closeCode?: number,
    readonly closeReason?: string,
  ) {
    super(message);
  }
}

/**
 * No response arrived within the call's timeout. `sent` false: the call never left the client
 * (it waited for a connection the whole time), which the message says, as a slow server and an
 * unreachable one are told apart by it, with why the last attempt to connect failed
 * (`lastFailure`: "HTTP 404", "connect ECONNREFUSED ...") when the client knows.
 */
export class TimeoutError extends RpcLocalError {
  override name = 'TimeoutError';
  constructor(
    readonly method: string,
    readonly timeoutMs: number,
    readonly sent = true,
    readonly lastFailure?: string,
  ) {
    super(
      `Call to "${method}" timed out after ${timeoutMs} ms${sent ? '' : `, never sent: no connection was open${lastFailure ? ` (last attempt: ${lastFailure})` : ''}`}`,
    );
  }
}

/** The caller aborted the call through its AbortSignal. */
export class CancelledError extends RpcLocalError {
  override name = 'CancelledError';
  constructor(
    readonly method: string,
    readonly reason?: unknown,
  ) {
    super(`Call to "${method}" was cancelled`);
  }
}

/** The table of calls awaiting a response is full. */
export class TooManyPendingCallsError extends RpcLocalError {
  override name = 'TooManyPendingCallsError';
  constructor(readonly limit: number) {
    super(`Too many pending calls (limit ${limit})`);
  }
}

/** A call was made while disconnected and the client is set to reject, or its queue is full. */
export class NotConnectedError extends RpcLocalError {
  override name = 'NotConnectedError';
}

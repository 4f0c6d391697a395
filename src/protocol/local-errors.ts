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
 * How `lastFailure` reads in a message: "last attempt: HTTP 404" when a dial failed, "last
 * connection closed with 1012 ..." when a connection had opened and was then lost (the client
 * writes that case's text starting "connection closed with").
 */
function lastFailureText(lastFailure: string): string {
  return lastFailure.startsWith('connection closed with ')
    ? `last ${lastFailure}`
    : `last attempt: ${lastFailure}`;
}

/**
 * No response arrived within the call's timeout. `sent` false: the call never left the client
 * (it waited for a connection the whole time), which the message says, as a slow server and an
 * unreachable one are told apart by it, with what ended the client's last connection or attempt
 * at one when the client knows (`lastFailure`): why the last dial failed ("HTTP 404", "connect
 * ECONNREFUSED ...") or how the last open connection closed ('connection closed with 1012
 * "server restarting"').
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
      `Call to "${method}" timed out after ${timeoutMs} ms${sent ? '' : `, never sent: no connection was open${lastFailure ? ` (${lastFailureText(lastFailure)})` : ''}`}`,
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

/**
 * The client stopped reconnecting: `attempts` reconnect attempts in a row failed
 * (`reconnect.maxAttempts`), and it closed. What waits on it (queued calls, `opened()`, calls
 * made later) rejects with this error; `lastFailure` is what ended the last attempt, as on
 * TimeoutError.
 */
export class ReconnectFailedError extends NotConnectedError {
  override name = 'ReconnectFailedError';
  constructor(
    readonly attempts: number,
    readonly lastFailure?: string,
  ) {
    super(
      `Reconnect attempts exhausted (reconnect.maxAttempts ${attempts}${lastFailure ? `; ${lastFailureText(lastFailure)}` : ''})`,
    );
  }
}

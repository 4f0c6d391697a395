// What the client tells the application about credentials: the error that says they were
// refused, why each connection ended (`disconnects$`), and which endings are refusals rather
// than a server that is down. The close codes are the gateway's (docs/identity.md).
import { ErrorCode } from '../protocol/error-codes.js';
import { JsonRpcError } from '../protocol/errors.js';
import { RpcLocalError } from '../protocol/local-errors.js';

/** What `rpc.authenticate` answers: the session and the identity's expiry (ms since the epoch). */
export interface AuthenticateResult {
  sessionId: string;
  user?: string;
  expiresAt?: number;
}

/** Why a connection, or an attempt at one, ended. */
export interface DisconnectEvent {
  /** The WebSocket close code (1006 when the socket never opened). */
  code?: number;
  /** The close reason, or the body of a refused upgrade. */
  reason?: string;
  /** The HTTP status of a refused upgrade (Node with `ws` only: browsers hide it). */
  httpStatus?: number;
  /** What went wrong: an AuthenticationError for refused credentials, a socket or provider error. */
  error?: Error;
  /** Whether the client dials again; false once it has stopped for good. */
  willRetry: boolean;
}

/**
 * The server refused the client's credentials: an upgrade answered 401 or 403 (`status`), an
 * `rpc.authenticate` answered -32010 (`code` -32010), or a close with 4401, 4403 or 4419
 * (`code`). `reason` is the server's own words. Never on the wire.
 */
export class AuthenticationError extends RpcLocalError {
  override name = 'AuthenticationError';
  constructor(
    message: string,
    readonly code?: number,
    readonly status?: number,
    readonly reason?: string,
  ) {
    super(message);
  }
}

/** Close codes that end a session for its credentials: refused, revoked, expired. */
const authCloseCodes: readonly number[] = [4401, 4403, 4419];
/** The close code of a session whose credentials expired unrefreshed. */
const EXPIRED_CLOSE_CODE = 4419;

/**
 * Whether `refused` is of credentials that expired, which a fresh token from the provider may
 * replace: a 4419 close, an in-band refusal for `expired`, or an upgrade's 401 whose body names
 * an expiry (`token expired`, `The token has expired`: the gateway gives an in-band refusal of
 * such a message the reason `expired`).
 */
export function isExpiry(refused: AuthenticationError): boolean {
  if (refused.code === EXPIRED_CLOSE_CODE) return true;
  if (refused.code === ErrorCode.Unauthenticated) return refused.reason === 'expired';
  return refused.status === 401 && /expired/i.test(refused.reason ?? '');
}

/** The AuthenticationError a connection's end amounts to, if it was a refusal of credentials. */
export function authFailureOf(
  event: Omit<DisconnectEvent, 'willRetry'>,
): AuthenticationError | undefined {
  const { code, reason, httpStatus, error } = event;
  if (error instanceof AuthenticationError) return error;
  if (httpStatus === 401 || httpStatus === 403) {
    return new AuthenticationError(
      `Upgrade refused with HTTP ${httpStatus}${reason ? `: ${reason}` : ''}`,
      undefined,
      httpStatus,
      reason,
    );
  }
  if (code !== undefined && authCloseCodes.includes(code)) {
    return new AuthenticationError(
      `Connection closed with ${code}${reason ? `: ${reason}` : ''}`,
      code,
      undefined,
      reason,
    );
  }
  return undefined;
}

/** A -32010 answer as an AuthenticationError (its `data.reason`, else its message); else undefined. */
export function refusalOf(err: unknown): AuthenticationError | undefined {
  if (!(err instanceof JsonRpcError) || err.code !== ErrorCode.Unauthenticated) return undefined;
  const data = err.data as { reason?: unknown } | undefined;
  const reason = typeof data?.reason === 'string' ? data.reason : err.message;
  const said = reason === err.message ? reason : `${err.message} (${reason})`;
  return new AuthenticationError(`Authentication refused: ${said}`, err.code, undefined, reason);
}

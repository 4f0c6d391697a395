import { isRecord } from '../peer/option-rules.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { JsonRpcError } from '../protocol/errors.js';
import { isWellFormed } from '../protocol/well-formed.js';
import { UpstreamError } from '../upstream/upstream-error.js';

/**
 * A hook's refusal: the upstream's JSON-RPC error -32010 (Unauthenticated) or -32004
 * (Unauthorized). Any other error, or no answer, is a failure of the hook.
 */
export function isRefusal(err: unknown): err is JsonRpcError {
  return (
    err instanceof JsonRpcError &&
    !(err instanceof UpstreamError) &&
    (err.code === ErrorCode.Unauthenticated || err.code === ErrorCode.Unauthorized)
  );
}

/** The HTTP status of a refusal: `data.status` when it is a 4xx, else 401 or 403 by the code. */
export function refusalStatus(err: JsonRpcError): number {
  const status = isRecord(err.data) ? err.data['status'] : undefined;
  if (typeof status === 'number' && Number.isInteger(status) && status >= 400 && status <= 499) {
    return status;
  }
  return err.code === ErrorCode.Unauthenticated ? 401 : 403;
}

/** What a failure is logged as: the upstream's short reason, never a stack for a timeout. */
export function failureOf(err: unknown): Record<string, unknown> {
  if (err instanceof UpstreamError)
    return { upstream: err.upstream, reason: err.reason, detail: err.detail };
  if (err instanceof JsonRpcError) return { code: err.code, message: err.message };
  return { err };
}

/**
 * The longest `user` a connect hook may answer, in UTF-8 bytes: it goes out on every upstream
 * request (X-Wsrpc-User), and headers are not a payload (X-Wsrpc-Context has its own bound).
 */
export const MAX_HOOK_USER_BYTES = 1024;

/** Why a non-empty `user` cannot name a session's user, or undefined when it can. */
function userProblem(user: string): string | undefined {
  if (!isWellFormed(user)) return 'user is not well-formed Unicode (a lone surrogate)';
  if (user.length > MAX_HOOK_USER_BYTES || Buffer.byteLength(user, 'utf8') > MAX_HOOK_USER_BYTES)
    return `user is longer than ${MAX_HOOK_USER_BYTES} bytes of UTF-8`;
  return undefined;
}

const isStrings = (value: unknown): value is string[] =>
  Array.isArray(value) && value.every((item) => typeof item === 'string');

/** The identity a connect hook answered, as the session's context holds it. */
export interface HookIdentity {
  /** The upstream's `context` (null when it gave none). */
  readonly context: unknown;
  readonly user?: string;
  /** Ms since the epoch. */
  readonly expiresAt?: number;
  readonly topics?: string[];
  readonly methods?: string[];
  /** Let in without a decision: the hook failed and `onFailure` is `allow`. */
  readonly anonymous?: true;
}

/**
 * A connect hook's result checked: `{ context, user?, expiresAt?, topics?, methods? }`; else why
 * not. `user` must be well-formed Unicode of at most MAX_HOOK_USER_BYTES.
 */
export function readConnectResult(result: unknown): HookIdentity | string {
  if (!isRecord(result)) return 'the result is not an object';
  const { context, user, expiresAt, topics, methods } = result;
  if (user !== undefined && (typeof user !== 'string' || user === ''))
    return 'user is not a non-empty string';
  const badUser = user === undefined ? undefined : userProblem(user);
  if (badUser !== undefined) return badUser;
  if (expiresAt !== undefined && (typeof expiresAt !== 'number' || !Number.isFinite(expiresAt))) {
    return 'expiresAt is not a number (ms since the epoch)';
  }
  if (topics !== undefined && !isStrings(topics)) return 'topics is not an array of strings';
  if (methods !== undefined && !isStrings(methods)) return 'methods is not an array of strings';
  const identity: { -readonly [K in keyof HookIdentity]: HookIdentity[K] } = {
    context: context ?? null,
  };
  if (user !== undefined) identity.user = user;
  if (expiresAt !== undefined) identity.expiresAt = expiresAt;
  if (topics !== undefined) identity.topics = Object.freeze([...topics]) as string[];
  if (methods !== undefined) identity.methods = Object.freeze([...methods]) as string[];
  return Object.freeze(identity);
}

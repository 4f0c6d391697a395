import type { Logger } from '../peer/logger.js';
import { isWellFormed } from '../protocol/well-formed.js';
import { UpstreamError } from './upstream-error.js';

/** A context header longer than this is left out (and logged once): headers are not a payload. */
export const MAX_CONTEXT_HEADER_BYTES = 8 * 1024;

/**
 * The longest X-Wsrpc-User, percent-encoded (a connect hook's user, 1 KiB of UTF-8, is at most
 * 3 KiB so). Unlike the context, a user is not left out when longer: the upstream would take
 * the call for an anonymous one. The call is refused instead (-32011), never sent; an upstream
 * would refuse the header otherwise (Node's servers take 16 KiB of headers in all), with a
 * status that tells the client nothing.
 */
export const MAX_USER_HEADER_BYTES = 8 * 1024;

/** What an upstream is told of the session a call came from. */
export interface SessionIdentity {
  readonly id: string;
  readonly context: unknown;
}

/**
 * The identity headers of an upstream request: `x-wsrpc-session`, `x-wsrpc-user` (percent-encoded,
 * when `userOf` names one; at most MAX_USER_HEADER_BYTES) and `x-wsrpc-context` (base64url of
 * the context's JSON, when it has one of at most MAX_CONTEXT_HEADER_BYTES). An object context's
 * header is worked out once per context object: a refreshed identity replaces the object, and so
 * the header.
 */
export class IdentityHeaders {
  private readonly contextHeaders = new WeakMap<object, string | null>();
  private warned = false;

  constructor(
    private readonly userOf: ((context: never) => string | undefined) | undefined,
    private readonly logger: Logger,
  ) {}

  /**
   * The headers of a request to `upstream` from `session`; throws an UpstreamError (-32011, the
   * request not to be sent) when its user cannot go out as X-Wsrpc-User: not well-formed Unicode
   * (no UTF-8 to percent-encode), or longer than MAX_USER_HEADER_BYTES once encoded.
   */
  of(session: SessionIdentity, upstream: string): Record<string, string> {
    const headers: Record<string, string> = { 'x-wsrpc-session': session.id };
    const { context } = session;
    const user = this.userOf && context !== undefined ? this.userOf(context as never) : undefined;
    if (typeof user === 'string') headers['x-wsrpc-user'] = userHeader(user, upstream);
    const encoded = this.contextHeader(context);
    if (encoded !== null) headers['x-wsrpc-context'] = encoded;
    return headers;
  }

  private contextHeader(context: unknown): string | null {
    if (context === undefined) return null;
    if (typeof context !== 'object' || context === null) return this.encode(context);
    let encoded = this.contextHeaders.get(context);
    if (encoded === undefined) {
      encoded = this.encode(context);
      this.contextHeaders.set(context, encoded);
    }
    return encoded;
  }

  private encode(context: unknown): string | null {
    let json: string | undefined;
    try {
      json = JSON.stringify(context);
    } catch {
      json = undefined;
    }
    const encoded = json === undefined ? null : Buffer.from(json, 'utf8').toString('base64url');
    if (encoded === null || encoded.length > MAX_CONTEXT_HEADER_BYTES) {
      if (!this.warned) {
        this.warned = true;
        this.logger.warn(
          { limit: MAX_CONTEXT_HEADER_BYTES },
          'session context not sent to upstreams: not JSON or too large for X-Wsrpc-Context',
        );
      }
      return null;
    }
    return encoded;
  }
}

/** `user` percent-encoded for X-Wsrpc-User, or the refusal of a request that would carry it. */
export function userHeader(user: string, upstream: string): string {
  // Each UTF-16 unit is at least one character encoded: a longer user cannot fit, whatever it is.
  if (user.length > MAX_USER_HEADER_BYTES) throw userTooLong(upstream);
  if (!isWellFormed(user)) {
    throw UpstreamError.unsendable(upstream, 'user not well-formed Unicode for X-Wsrpc-User');
  }
  const encoded = encodeURIComponent(user);
  if (encoded.length > MAX_USER_HEADER_BYTES) throw userTooLong(upstream);
  return encoded;
}

function userTooLong(upstream: string): UpstreamError {
  return UpstreamError.unsendable(
    upstream,
    'user too long for X-Wsrpc-User',
    MAX_USER_HEADER_BYTES,
  );
}

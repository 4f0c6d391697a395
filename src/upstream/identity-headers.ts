import type { Logger } from '../peer/logger.js';

/** A context header longer than this is left out (and logged once): headers are not a payload. */
export const MAX_CONTEXT_HEADER_BYTES = 8 * 1024;

/** What an upstream is told of the session a call came from. */
export interface SessionIdentity {
  readonly id: string;
  readonly context: unknown;
}

/**
 * The identity headers of an upstream request: `x-wsrpc-session`, `x-wsrpc-user` (percent-encoded,
 * when `userOf` names one) and `x-wsrpc-context` (base64url of the context's JSON, when it has
 * one of at most MAX_CONTEXT_HEADER_BYTES). An object context's header is worked out once per
 * context object: a refreshed identity replaces the object, and so the header.
 */
export class IdentityHeaders {
  private readonly contextHeaders = new WeakMap<object, string | null>();
  private warned = false;

  constructor(
    private readonly userOf: ((context: never) => string | undefined) | undefined,
    private readonly logger: Logger,
  ) {}

  of(session: SessionIdentity): Record<string, string> {
    const headers: Record<string, string> = { 'x-wsrpc-session': session.id };
    const { context } = session;
    const user = this.userOf && context !== undefined ? this.userOf(context as never) : undefined;
    if (typeof user === 'string') headers['x-wsrpc-user'] = encodeURIComponent(user);
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

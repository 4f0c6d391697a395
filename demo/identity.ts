import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SignJWT } from 'jose';
import { jwtAuth } from '../src/jwt.js';
import type { JwtContext } from '../src/jwt.js';
import type { Gateway, GatewayOptions, UpgradeRequest } from '../src/index.js';

/*
 * Short-lived tokens for the demo page, to show an identity refreshed on a live connection: the
 * page's client fetches a token from GET /demo/token (`getToken`), presents it in-band on each
 * connection, and the gateway asks for a fresh one (`rpc.token`) before it expires. Connections
 * without a token (the console, the CLI, curl) stay anonymous and never expire.
 */

/** An anonymous session: no token was presented. */
export interface Anonymous {
  readonly anonymous: true;
}

export type DemoContext = JwtContext | Anonymous;

/** Where the page gets its tokens. */
export const TOKEN_PATH = '/demo/token';

export interface DemoIdentity {
  /** The options to spread into `createGateway`. */
  readonly options: Pick<GatewayOptions<DemoContext>, 'authenticate' | 'identity'>;
  /** Serves GET /demo/token; false for any other request. */
  readonly tokenHandler: (req: IncomingMessage, res: ServerResponse) => boolean;
  /** `demo.whoami`: the caller's session and token, as the page shows them. */
  register(gateway: Gateway<DemoContext>): void;
}

/**
 * Tokens that live `ttlMs` (whole seconds: a JWT's `exp` counts seconds), signed with a secret
 * made at start; the gateway asks for a fresh one `ttlMs / 4` before expiry.
 */
export function demoIdentity(ttlMs: number): DemoIdentity {
  const secret = randomBytes(32);
  const ttlSec = Math.max(2, Math.ceil(ttlMs / 1000));
  // The tokens are checked by the gateway that issued them: no clock to tolerate.
  const jwt = jwtAuth({ secret, clockToleranceSec: 0 });
  let issued = 0;

  const authenticate = (request: UpgradeRequest): DemoContext | Promise<JwtContext> =>
    request.token === undefined ? { anonymous: true } : jwt.authenticate(request);

  const tokenHandler = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (req.method !== 'GET' || (req.url ?? '').split('?', 1)[0] !== TOKEN_PATH) return false;
    issued++;
    void new SignJWT({ n: issued })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('demo-visitor')
      .setIssuedAt()
      .setExpirationTime(`${ttlSec}s`)
      .sign(secret)
      .then((token) => {
        res.writeHead(200, { 'Content-Type': 'text/plain', 'Cache-Control': 'no-store' });
        res.end(token);
      });
    return true;
  };

  return {
    options: {
      authenticate,
      identity: {
        expiresAtOf: (context) => ('anonymous' in context ? undefined : context.expiresAt),
        refreshAheadMs: Math.round((ttlSec * 1000) / 4),
      },
    },
    tokenHandler,
    register(gateway) {
      gateway.method('demo.whoami', (_params, ctx) => {
        const { context, id, expiresAt } = ctx.session;
        if ('anonymous' in context) return { sessionId: id, anonymous: true };
        return { sessionId: id, token: context.claims['n'], expiresAt: expiresAt ?? null };
      });
    },
  };
}

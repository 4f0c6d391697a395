// Where the token is on a request: the gateway's `token` (the upgrade's or POST's Bearer header,
// or the in-band `rpc.authenticate` one), the Bearer header itself, then, when configured, a
// cookie or an offered subprotocol with a prefix.
import type { UpgradeRequest } from '../options.js';

/** What `jwtAuth`'s `authenticate` reads of the gateway's request. */
export type JwtAuthRequest = Pick<UpgradeRequest, 'headers' | 'cookies' | 'protocols'> & {
  /** The token the gateway found (Bearer header or in-band), when it sets one. */
  readonly token?: string | undefined;
};

export interface TokenPlaces {
  readonly cookie: string | undefined;
  readonly protocolPrefix: string | undefined;
}

const BEARER = /^Bearer +(\S+) *$/i;

/** The token on `request`, or undefined when there is none. */
export function tokenOf(request: JwtAuthRequest, places: TokenPlaces): string | undefined {
  if (typeof request.token === 'string' && request.token !== '') return request.token;
  const authorization = request.headers?.authorization;
  const bearer = typeof authorization === 'string' ? BEARER.exec(authorization)?.[1] : undefined;
  if (bearer !== undefined) return bearer;
  if (places.cookie !== undefined) {
    const cookie = request.cookies?.[places.cookie];
    if (cookie) return cookie;
  }
  const prefix = places.protocolPrefix;
  if (prefix !== undefined) {
    const offered = request.protocols?.find(
      (p) => p.startsWith(prefix) && p.length > prefix.length,
    );
    if (offered !== undefined) return offered.slice(prefix.length);
  }
  return undefined;
}

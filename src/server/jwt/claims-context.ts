// A verified token's claims read into the session's identity: who (the user claim), until when
// (exp), issued when (iat), and the topic and method patterns the token allows.
import type { JWTPayload } from 'jose';
import { UpgradeRejection } from '../upgrade-rejection.js';
import type { JwtClaimNames } from './jwt-options.js';
import { refusalHeaders } from './refusals.js';
import { isWellFormed } from '../../protocol/well-formed.js';

/** The session's context `jwtAuth` makes from a verified token. */
export interface JwtContext {
  /** The user claim (`sub` by default). */
  readonly user: string;
  /** `exp`, in ms since the epoch. */
  readonly expiresAt: number;
  /** `iat`, in ms since the epoch; undefined when the token has none. */
  readonly issuedAt: number | undefined;
  /** Topic patterns allowed (exact names, or prefixes ending in `*`); undefined: no restriction. */
  readonly topics?: readonly string[];
  /** Method patterns allowed (exact names, or prefixes ending in `*`); undefined: no restriction. */
  readonly methods?: readonly string[];
  /** Every claim of the token, as verified. */
  readonly claims: Readonly<JWTPayload>;
}

/** The identity the verified `claims` name; a claim of the wrong shape refuses the token. */
export function identityOf(
  claims: JWTPayload,
  names: Readonly<Required<JwtClaimNames>>,
): JwtContext {
  const user = claims[names.user];
  // Not well-formed (a lone surrogate, which a token's JSON can spell): such a user has no UTF-8,
  // so it could not go out as X-Wsrpc-User, into a log line or a broker's key as itself.
  if (typeof user !== 'string' || user === '' || !isWellFormed(user)) {
    throw malformedClaim(names.user);
  }
  // Present and a number: jwtVerify requires exp and checks its type.
  const expiresAt = claims.exp! * 1000;
  const issuedAt = typeof claims.iat === 'number' ? claims.iat * 1000 : undefined;
  const topics = patternsOf(claims[names.topics], names.topics);
  const methods = patternsOf(claims[names.methods], names.methods);
  return Object.freeze({
    user,
    expiresAt,
    issuedAt,
    ...(topics && { topics }),
    ...(methods && { methods }),
    claims: Object.freeze({ ...claims }),
  });
}

/**
 * A claim of patterns: absent is no restriction, an array of non-empty strings or one string of
 * space-separated patterns (as OAuth's `scope`) is the list; anything else refuses the token.
 */
function patternsOf(value: unknown, claim: string): readonly string[] | undefined {
  if (value === undefined) return undefined;
  const list = typeof value === 'string' ? value.split(' ').filter(Boolean) : value;
  if (!Array.isArray(list) || list.some((item) => typeof item !== 'string' || item === '')) {
    throw malformedClaim(claim);
  }
  return Object.freeze([...(list as string[])]);
}

function malformedClaim(claim: string): UpgradeRejection {
  const message = `malformed claim "${claim}"`;
  return new UpgradeRejection(401, message, refusalHeaders(message));
}

// jwtAuth: the gateway's identity hooks from JSON Web Tokens verified with jose. The token's
// header is read first (its `alg` must be allowed: never `none`, never one the key is not for),
// then jwtVerify checks the signature, exp (required), nbf, iss and aud with a clock tolerance,
// and the claims become the session's context. Every refusal is an UpgradeRejection.
import { decodeProtectedHeader, errors, jwtVerify } from 'jose';
import type { JWTPayload } from 'jose';
import { identityOf } from './claims-context.js';
import type { JwtContext } from './claims-context.js';
import { keySourceOf } from './key-source.js';
import { MAX_TOKEN_LENGTH, resolveJwtOptions } from './jwt-options.js';
import type { JwtAuthOptions } from './jwt-options.js';
import { refusalHeaders, refusalOf, refuseToken } from './refusals.js';
import { UpgradeRejection } from '../upgrade-rejection.js';
import { tokenOf } from './token-source.js';
import type { JwtAuthRequest } from './token-source.js';

/** What `jwtAuth` returns: spread it into `createGateway`'s options. */
export interface JwtAuth<C extends JwtContext = JwtContext> {
  /** Verifies the request's token; its context, or an UpgradeRejection (401, or 503). */
  readonly authenticate: (request: JwtAuthRequest) => Promise<C>;
  /** The user claim. */
  readonly userOf: (context: C) => string;
  readonly identity: {
    /**
     * When the gateway stops taking the token: `exp` plus the clock tolerance, in ms since the
     * epoch (a token is accepted until then, so a session keeps it as long).
     */
    readonly expiresAtOf: (context: C) => number;
    /** `iat` in ms since the epoch, or undefined. */
    readonly issuedAtOf: (context: C) => number | undefined;
    /** The topic patterns the token allows; undefined: no restriction from the token. */
    readonly topicsOf: (context: C) => readonly string[] | undefined;
    /** The method patterns the token allows; undefined: no restriction from the token. */
    readonly methodsOf: (context: C) => readonly string[] | undefined;
    /**
     * Whether a request carries a token where `authenticate` reads one (Bearer, and the cookie
     * or subprotocol configured): with `inBand`, such a connection is authenticated at once.
     */
    readonly carriesToken: (request: JwtAuthRequest) => boolean;
  };
}

/**
 * Identity from JSON Web Tokens: `createGateway({ ...jwtAuth({ jwksUrl, issuer, audience }) })`.
 * The options are checked here (a TypeError or RangeError naming the option).
 */
export function jwtAuth<C extends JwtContext = JwtContext>(options: JwtAuthOptions<C>): JwtAuth<C> {
  const resolved = resolveJwtOptions<C>(options);
  const { key, algorithms } = keySourceOf(resolved);
  const toleranceMs = resolved.clockToleranceSec * 1000;
  const verifyOptions = {
    algorithms: [...algorithms],
    issuer: resolved.issuer as string | string[] | undefined,
    audience: resolved.audience as string | string[] | undefined,
    clockTolerance: resolved.clockToleranceSec,
    requiredClaims: ['exp', resolved.claims.user],
  };

  /** The verified claims of `token`; refusals thrown as UpgradeRejection. */
  const verify = async (token: string): Promise<JWTPayload> => {
    if (token.length > MAX_TOKEN_LENGTH) throw refuseToken('token too long');
    let alg: unknown;
    try {
      alg = decodeProtectedHeader(token).alg;
    } catch {
      throw refuseToken('malformed token');
    }
    if (typeof alg !== 'string' || !algorithms.includes(alg)) {
      throw refuseToken('algorithm not allowed');
    }
    try {
      return (await jwtVerify(token, key as Parameters<typeof jwtVerify>[1], verifyOptions))
        .payload;
    } catch (err) {
      if (err instanceof errors.JWKSMultipleMatchingKeys) return verifyWithEach(token, err);
      throw refusalOf(err);
    }
  };

  /**
   * A token several keys of the set fit (no `kid`, or one `kid` on the old and the new key while
   * they rotate): jose hands the candidates over in the error, for the caller to try in turn.
   * The first whose signature holds verifies it; none: signature invalid.
   */
  const verifyWithEach = async (
    token: string,
    candidates: errors.JWKSMultipleMatchingKeys,
  ): Promise<JWTPayload> => {
    for await (const candidate of candidates) {
      try {
        return (await jwtVerify(token, candidate, verifyOptions)).payload;
      } catch (err) {
        if (err instanceof errors.JWSSignatureVerificationFailed) continue;
        throw refusalOf(err);
      }
    }
    throw refuseToken('signature invalid');
  };

  const authenticate = async (request: JwtAuthRequest): Promise<C> => {
    const token = tokenOf(request, resolved);
    if (token === undefined) throw new UpgradeRejection(401, 'token required', refusalHeaders());
    const claims = await verify(token);
    // jose takes any iat without maxTokenAge. One ahead of the clock would pass for credentials
    // issued after a revocation made meanwhile (issuedAtOf), letting a revoked token in.
    if (typeof claims.iat === 'number' && claims.iat * 1000 > Date.now() + toleranceMs) {
      throw refuseToken('token issued in the future');
    }
    const identity = identityOf(claims, resolved.claims);
    return resolved.context ? resolved.context(identity.claims, identity) : (identity as C);
  };

  return {
    authenticate,
    userOf: (context) => context.user,
    identity: {
      expiresAtOf: (context) => context.expiresAt + toleranceMs,
      issuedAtOf: (context) => context.issuedAt,
      topicsOf: (context) => context.topics,
      methodsOf: (context) => context.methods,
      carriesToken: (request) => tokenOf(request, resolved) !== undefined,
    },
  };
}

// Every way a token can fail, as the UpgradeRejection the gateway answers with: 401 with a
// message that says what was wrong with the token, or 503 when the key set could not be had
// (the server's fault, worth trying again). Nothing else leaves `authenticate` for a bad token.
import { errors } from 'jose';
import { UpgradeRejection } from '../upgrade-rejection.js';

/**
 * The key set (`jwksUrl`, or a key in a set) could not be fetched or used: `detail` says why
 * ("timed out", "HTTP 500", "not a JSON Web Key Set"...).
 */
export class KeySetUnavailable extends Error {
  override name = 'KeySetUnavailable';
  constructor(
    readonly detail: string,
    options?: ErrorOptions,
  ) {
    super(`key set unavailable: ${detail}`, options);
  }
}

/** RFC 6750's challenge: which scheme, and what was wrong with the token given. */
export function refusalHeaders(message?: string): Record<string, string> {
  if (message === undefined) return { 'WWW-Authenticate': 'Bearer' };
  return {
    'WWW-Authenticate': `Bearer error="invalid_token", error_description="${headerText(message)}"`,
  };
}

const utf8 = new TextEncoder();

/**
 * `message` as RFC 6750 lets an error_description spell it (printable ASCII but `"` and `\`):
 * its quotes left out, and every other character it does not allow, and `%` (which spells
 * them), as the percent-encoded bytes of its UTF-8. A configured claim name may be any text
 * (`用户`), which a header value could not carry as it is.
 */
function headerText(message: string): string {
  return message
    .replace(/"/g, '')
    .replace(/[^\x20\x21\x23\x24\x26-\x5b\x5d-\x7e]+/g, (run) =>
      Array.from(
        utf8.encode(run),
        (byte) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`,
      ).join(''),
    );
}

/** A 401 refusal of the token, saying why. */
export function refuseToken(message: string): UpgradeRejection {
  return new UpgradeRejection(401, message, refusalHeaders(message));
}

/** Seconds a client should wait before trying again when the key set is unavailable. */
const RETRY_AFTER_SEC = '5';

/** What `jwtVerify` (or the key resolver under it) threw, as the refusal to answer with. */
export function refusalOf(err: unknown): UpgradeRejection {
  if (err instanceof UpgradeRejection) return err;
  if (err instanceof KeySetUnavailable) {
    return new UpgradeRejection(503, err.message, { 'Retry-After': RETRY_AFTER_SEC });
  }
  if (err instanceof errors.JWTExpired) return refuseToken('token expired');
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.reason === 'missing') return refuseToken(`missing claim "${err.claim}"`);
    if (err.claim === 'nbf' && err.reason === 'check_failed') {
      return refuseToken('token not yet valid');
    }
    if (err.claim === 'aud') return refuseToken('audience mismatch');
    if (err.claim === 'iss') return refuseToken('issuer mismatch');
    return refuseToken(`malformed claim "${err.claim}"`);
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) return refuseToken('signature invalid');
  if (err instanceof errors.JOSEAlgNotAllowed) return refuseToken('algorithm not allowed');
  if (err instanceof errors.JWKSNoMatchingKey) return refuseToken('unknown key id');
  // JWSInvalid, JWTInvalid, JOSENotSupported (a crit header, b64: false...), and whatever else a
  // token built to fail might cause inside the verification: refused, never thrown on.
  return refuseToken('malformed token');
}

import { isUtf8 } from 'node:buffer';
import { encodeFailure } from './encode.js';
import { ErrorCode, defaultErrorMessage } from './error-codes.js';

/**
 * The answer to bytes from the network that are not UTF-8 where a JSON-RPC message was due
 * (an HTTP body, an NDJSON line, a broker message): -32700 under id null, `data.reason`
 * "invalid UTF-8". A JSON text is UTF-8 (RFC 8259, section 8.1), so such bytes are no JSON at
 * all; reading them with U+FFFD in place of the bad ones would answer a message the peer never
 * sent.
 */
export const INVALID_UTF8_REPLY = encodeFailure(null, {
  code: ErrorCode.ParseError,
  message: defaultErrorMessage[ErrorCode.ParseError]!,
  data: { reason: 'invalid UTF-8' },
});

/** The text of `bytes` when they are well-formed UTF-8, else undefined (never U+FFFD). */
export function strictUtf8(bytes: Uint8Array): string | undefined {
  if (!isUtf8(bytes)) return undefined;
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
}

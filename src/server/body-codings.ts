// A request body the gateway would misread, told apart before it is read: POST /rpc and the
// event stream's POSTs read bodies as UTF-8 text, uncompressed.
import type { IncomingMessage } from 'node:http';

/** Why a POST's body cannot be read as sent: the status, and the text saying what to send. */
export interface CodingRefusal {
  status: 415 | 501;
  message: string;
  headers?: Record<string, string>;
}

/** A header's comma-separated tokens, trimmed and in lower case, empty ones left out. */
function tokensOf(header: string | undefined): string[] {
  if (header === undefined) return [];
  return header
    .split(',')
    .map((token) => token.trim().toLowerCase())
    .filter((token) => token !== '');
}

/**
 * Charset labels of text a UTF-8 reading reads as sent: UTF-8's (the WHATWG Encoding standard's
 * labels for it) and US-ASCII, a subset of it.
 */
const UTF8_LABELS = new Set([
  'utf-8',
  'utf8',
  'unicode-1-1-utf-8',
  'unicode11utf8',
  'unicode20utf8',
  'x-unicode20utf8',
  'us-ascii',
]);

/** The `charset` parameters of a Content-Type (`charset="UTF-8"` read as `utf-8`). */
function charsetsOf(contentType: string): string[] {
  const charsets: string[] = [];
  for (const parameter of contentType.split(';').slice(1)) {
    const at = parameter.indexOf('=');
    if (at < 0 || parameter.slice(0, at).trim().toLowerCase() !== 'charset') continue;
    charsets.push(
      parameter
        .slice(at + 1)
        .trim()
        .replace(/^"(.*)"$/, '$1')
        .toLowerCase(),
    );
  }
  return charsets;
}

/**
 * A body the gateway would misread, refused before it is read: one compressed (Content-Encoding
 * other than identity: 415, which RFC 9110 15.5.16 gives an unsupported content coding, with
 * Accept-Encoding naming what is), one in a charset other than UTF-8 (415: JSON text exchanged
 * between systems is UTF-8, RFC 8259 8.1, and strictUtf8 reads nothing else), or one sent with a
 * transfer coding other than chunked (501, RFC 9112 6.1; Node's parser lets `gzip, chunked`
 * through, undoing only the chunking). Read as UTF-8 regardless, each would be a parse error at
 * best, or a UTF-16 or Latin-1 body read as other text at worst.
 */
export function codingRefusal(
  req: IncomingMessage,
  contentType: string,
): CodingRefusal | undefined {
  const content = tokensOf(req.headers['content-encoding']).find((c) => c !== 'identity');
  if (content !== undefined) {
    return {
      status: 415,
      message: `Content-Encoding ${content} is not supported: send the body uncompressed`,
      headers: { 'accept-encoding': 'identity' },
    };
  }
  const charset = charsetsOf(contentType).find((c) => !UTF8_LABELS.has(c));
  if (charset !== undefined) {
    return {
      status: 415,
      message: `charset ${charset} is not supported: send the body as UTF-8 (charset=utf-8)`,
    };
  }
  const transfer = tokensOf(req.headers['transfer-encoding']).find((c) => c !== 'chunked');
  if (transfer !== undefined) {
    return {
      status: 501,
      message: `Transfer-Encoding ${transfer} is not supported: send the body chunked or with Content-Length`,
    };
  }
  return undefined;
}

import { STATUS_CODES } from 'node:http';
import { schemeOf } from './endpoint.js';
import type { Endpoint } from './endpoint.js';
import { terminalText } from './terminal-text.js';

/** What the connection was trying to do when it failed, for the hints. */
export interface Attempt {
  readonly endpoint: Endpoint;
  readonly timeoutMs: number;
}

const untrustedCertificate = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
]);

const notTls = new Set([
  'EPROTO',
  'ERR_SSL_WRONG_VERSION_NUMBER',
  'ERR_SSL_PACKET_LENGTH_TOO_LONG',
  'ERR_SSL_HTTP_REQUEST',
]);

const trustHint =
  'trust it with --cacert FILE (the PEM certificate) or skip verification with -k/--insecure';

function plainScheme(endpoint: Endpoint): string {
  return schemeOf(endpoint.kind, false);
}

export function timeoutMessage(attempt: Attempt, what = 'answer'): string {
  return `no ${what} from ${attempt.endpoint.hostPort} within ${attempt.timeoutMs} ms; is the server up and the URL right? (raise the limit with --timeout MS)`;
}

/**
 * A socket, DNS or TLS error (an `err.code` from Node or a message from `ws`), for a person.
 * The message and the certificate's names may quote the server: they go through terminalText.
 */
export function describeNetworkError(err: Error, attempt: Attempt): string {
  const { endpoint } = attempt;
  const where = endpoint.hostPort;
  const code = terminalText((err as NodeJS.ErrnoException).code ?? '');
  const message = terminalText(err.message);
  if (code === 'ECONNREFUSED') {
    return `cannot connect to ${where}: connection refused; is the gateway running?`;
  }
  if (code === 'ENOTFOUND') {
    return `cannot connect to ${where}: unknown host ${endpoint.host} (ENOTFOUND); check the URL`;
  }
  if (code === 'EAI_AGAIN') {
    return `cannot connect to ${where}: could not resolve ${endpoint.host} (EAI_AGAIN, DNS not answering); check your network`;
  }
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') {
    return `cannot connect to ${where}: no route to the host (${code}); check the address and your network`;
  }
  if (code === 'ETIMEDOUT' || err.message === 'Opening handshake has timed out') {
    return timeoutMessage(attempt);
  }
  if (untrustedCertificate.has(code)) {
    const why =
      code === 'DEPTH_ZERO_SELF_SIGNED_CERT' || code === 'SELF_SIGNED_CERT_IN_CHAIN'
        ? 'is self-signed'
        : 'is signed by an authority this machine does not trust';
    return `TLS: the certificate of ${where} ${why} (${code}); ${trustHint}`;
  }
  if (code === 'CERT_HAS_EXPIRED' || code === 'CERT_NOT_YET_VALID') {
    return `TLS: the certificate of ${where} is not valid now (${code}); fix the server's certificate, or skip verification with -k/--insecure`;
  }
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    const reason = (err as { reason?: unknown }).reason;
    const detail = typeof reason === 'string' ? `: ${terminalText(reason)}` : '';
    return `TLS: the certificate of ${where} is not valid for the name "${endpoint.host}" (hostname mismatch${detail}); use a host name the certificate lists, or skip verification with -k/--insecure`;
  }
  if (notTls.has(code) || /wrong version number|packet length too long/i.test(err.message)) {
    return `TLS handshake with ${where} failed (${code || message}); is the server speaking TLS? If not, use ${plainScheme(endpoint)}`;
  }
  if (code === 'ECONNRESET' || err.message === 'socket hang up') {
    const hint = endpoint.secure
      ? 'check the URL and port (does the server take TLS connections there?)'
      : `check the URL and port; if the server uses TLS, use ${schemeOf(endpoint.kind, true)}`;
    return `${where} closed the connection before answering; ${hint}`;
  }
  if (code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL') || code.includes('CERT')) {
    return `TLS: the connection to ${where} failed (${code}: ${message}); check --cacert, or skip verification with -k/--insecure`;
  }
  if (
    err.message === 'Server sent no subprotocol' ||
    err.message === 'Server sent an invalid subprotocol'
  ) {
    return `${where} accepted the WebSocket but none of the subprotocols offered (${message}); check --protocol`;
  }
  if (/Invalid (Upgrade|Sec-WebSocket-Accept) header/.test(err.message)) {
    return `${where} did not answer as a WebSocket server (${message}); is ${endpoint.url.pathname} a WebSocket endpoint?`;
  }
  return `cannot talk to ${where}: ${code ? `${code}: ` : ''}${message}`;
}

/** Longest part of a response body quoted in a message, in characters. */
const MAX_SNIPPET = 300;

/**
 * One line of a response body (runs of white space made one space), shortened and safe for a
 * terminal (terminalText), or '' when there is nothing to show.
 */
export function bodySnippet(body: string, max = MAX_SNIPPET): string {
  return terminalText(body.replace(/\s+/g, ' ').trim(), max);
}

/**
 * An answer that is not a JSON-RPC response (response-shape.ts), for a person, alike over every
 * transport: `text` quoted in one line, safe for a terminal (bodySnippet), and `reason`;
 * `status` is the HTTP status it came with.
 */
export function notAResponse(
  endpoint: Endpoint,
  text: string,
  reason: string,
  status?: number,
): string {
  const snippet = bodySnippet(text, 200);
  const empty = status === undefined ? ' (an empty message)' : ' (an empty body)';
  const quote = snippet ? `: ${snippet} (${reason})` : empty;
  const answered = status === undefined ? 'answered' : `answered ${status}`;
  const hint =
    endpoint.kind === 'tcp'
      ? `does ${endpoint.hostPort} serve JSON-RPC (newline-delimited JSON)?`
      : `is ${endpoint.url.pathname} a JSON-RPC endpoint?`;
  return `${endpoint.hostPort} ${answered} but not with a JSON-RPC response${quote}; ${hint}`;
}

export interface HttpAnswer {
  status: number;
  body: string;
  headers: Readonly<Record<string, string | string[] | undefined>>;
}

/**
 * An HTTP status the CLI did not want (a refused WebSocket upgrade, or a POST the server
 * would not take), for a person: what it means and what to try.
 */
export function describeHttpStatus(answer: HttpAnswer, endpoint: Endpoint): string {
  const { status } = answer;
  const where = endpoint.hostPort;
  const path = endpoint.url.pathname;
  const statusText = `${status} ${STATUS_CODES[status] ?? ''}`.trim();
  const snippet = bodySnippet(answer.body);
  const said =
    snippet && snippet !== STATUS_CODES[status] ? ` (the server said: "${snippet}")` : '';
  const retryAfter = answer.headers['retry-after'];
  const retry = typeof retryAfter === 'string' ? ` in ${terminalText(retryAfter)} s` : ' later';
  const how = endpoint.kind === 'ws' ? 'the WebSocket upgrade' : 'the request';
  switch (status) {
    case 401:
    case 403: {
      const credentials =
        endpoint.kind === 'ws'
          ? "-H 'Authorization: Bearer TOKEN' or --protocol TOKEN"
          : "-H 'Authorization: Bearer TOKEN'";
      return `authentication rejected: ${where} answered ${how} with ${statusText}${said}; send credentials with ${credentials}`;
    }
    case 404:
      return `${where} has no endpoint at ${path} (404 Not Found)${said}; check the path in the URL (the gateway's default is /rpc)`;
    case 405:
      return `${where} does not take ${endpoint.kind === 'ws' ? 'WebSocket upgrades' : 'POST requests'} at ${path} (405 Method Not Allowed)${said}; ${endpoint.kind === 'ws' ? 'check the URL' : 'try ws:// (or wss://) instead'}`;
    case 426:
      return endpoint.kind === 'http'
        ? `${where} only speaks WebSocket at ${path} (426 Upgrade Required); use ws:// or wss://`
        : `${where} asked for a protocol upgrade the CLI does not speak (426 Upgrade Required)${said}`;
    case 413:
      return `the request is too large for ${where} (413 Payload Too Large)${said}; send smaller PARAMS`;
    case 415:
      return `${where} refused the request's content type (415 Unsupported Media Type)${said}`;
    case 429:
      return `${where} refused the connection: too many from this address (429 Too Many Requests)${said}; retry${retry}`;
    case 503:
      return `${where} is unavailable, at capacity or shutting down (503 Service Unavailable)${said}; retry${retry}`;
    default:
      break;
  }
  if (status >= 300 && status < 400) {
    const location = answer.headers['location'];
    const to = typeof location === 'string' ? ` to ${terminalText(location)}` : '';
    return `${where} redirects ${path}${to} (${statusText}); use that URL instead`;
  }
  if (status >= 200 && status < 300 && endpoint.kind === 'ws') {
    return `${where} answered ${statusText} instead of opening a WebSocket; is ${path} a WebSocket endpoint?`;
  }
  if (status >= 500) {
    return `${where} failed to handle ${how} (${statusText})${said}; see the server's log`;
  }
  return `${where} refused ${how} with ${statusText}${said}`;
}

const closeMeanings: Readonly<Record<number, string>> = {
  1000: 'normal close',
  1001: 'going away',
  1006: 'connection cut without a close frame',
  1008: 'policy violation',
  1009: 'message too big',
  1011: 'server error',
  1012: 'service restart',
  1013: 'try again later',
};

/** The server closed (or the network cut) the connection while the CLI still needed it. */
export function describeClose(
  code: number | undefined,
  reason: string | undefined,
  endpoint: Endpoint,
): string {
  if (code === undefined) return `the connection to ${endpoint.hostPort} closed`;
  const meaning = closeMeanings[code];
  const said = reason === meaning || reason === undefined ? undefined : terminalText(reason);
  const parts = [String(code), meaning, said].filter((p) => p !== undefined && p !== '');
  return `${endpoint.hostPort} closed the connection (${parts.join(', ')})`;
}

/** A refusal line from a TCP or TLS server: a JSON-RPC error with id null, its HTTP-like status in data. */
export interface StreamRefusal {
  readonly code: number;
  readonly message: string;
  readonly status: number;
}

/** The refusal a server sends on a tcp:// or tls:// connection it will not serve, or undefined. */
export function streamRefusalOf(line: string): StreamRefusal | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const { id, error } = value as { id?: unknown; error?: unknown };
  if (id !== null || typeof error !== 'object' || error === null) return undefined;
  const { code, message, data } = error as { code?: unknown; message?: unknown; data?: unknown };
  const status = (data as { status?: unknown } | null | undefined)?.status;
  if (typeof code !== 'number' || typeof status !== 'number') return undefined;
  return { code, message: typeof message === 'string' ? message : '', status };
}

/** A tcp:// or tls:// server refused the connection (there is no HTTP status line to read). */
export function describeStreamRefusal(refusal: StreamRefusal, endpoint: Endpoint): string {
  const { status } = refusal;
  const where = endpoint.hostPort;
  const statusText = `${status} ${STATUS_CODES[status] ?? ''}`.trim();
  const why = refusal.message === '' ? statusText : `"${terminalText(refusal.message)}"`;
  const refused = `${where} refused the connection: ${why} (error ${refusal.code}, status ${statusText})`;
  if (status === 401 || status === 403) {
    const secure = schemeOf('ws', endpoint.secure);
    return `${refused}; authentication rejected: ${endpoint.url.protocol}// carries no headers or tokens, so the server decides by address; ask for this address to be let in, or use the server's ${secure} endpoint with -H or --protocol`;
  }
  if (status === 429 || status === 503) return `${refused}; retry later`;
  if (status >= 500) return `${refused}; see the server's log`;
  return refused;
}

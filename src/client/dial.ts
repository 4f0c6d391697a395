// One dial's inputs: the URL, subprotocols, headers and token, each of which may come from a
// function (sync or async) called before every dial; and the socket made from them, with the
// HTTP status of a refused upgrade read where the runtime shows it (`ws` in Node).
import type { WebSocketConstructor, WebSocketLike } from '../transport/websocket-transport.js';
import type { ClientConfig, PerDial } from './client-options.js';
import { checkUrl, isNativeSocket } from './client-options.js';

/** What one dial uses. `token` is set for in-band authentication only. */
export interface Dial {
  url: string;
  protocols: string | string[] | undefined;
  headers: Record<string, string> | undefined;
  token: string | undefined;
}

/** The upgrade's refusal, as `ws` reports it before the socket closes. */
export interface HttpRefusal {
  status: number;
  body: string;
}

const isPromise = (value: unknown): value is Promise<unknown> =>
  typeof (value as { then?: unknown } | null)?.then === 'function';

/**
 * The codec's subprotocol, then JSON's (what a gateway without the codec answers), then the rest.
 * An encoding's subprotocol (`jsonrpc-2.0+NAME`) among the rest other than the codec's is a
 * TypeError: a gateway that picked it would speak what this client cannot read (closed 1003,
 * again at every dial); the encoding is chosen by the `encoding` option.
 */
function withEncoding(config: ClientConfig, protocols: Dial['protocols']): Dial['protocols'] {
  const codec = config.encoding;
  const rest =
    protocols === undefined ? [] : typeof protocols === 'string' ? [protocols] : protocols;
  const foreign = rest.find((p) => p.startsWith('jsonrpc-2.0+') && p !== codec?.subprotocol);
  if (foreign !== undefined) {
    throw new TypeError(
      `protocols offers ${foreign}, an encoding this client has no codec for: choose it with the encoding option`,
    );
  }
  if (!codec) return protocols;
  // Each offered once: a name twice makes the WebSocket constructor throw, at every dial.
  const offered = [codec.subprotocol, 'jsonrpc-2.0'];
  return [...offered, ...rest.filter((p) => !offered.includes(p))];
}

const valueOf = <T>(value: PerDial<T> | undefined): T | Promise<T> | undefined =>
  typeof value === 'function' ? (value as () => T | Promise<T>)() : value;

/**
 * The inputs of the next dial: at once when none comes from an async function (so a client
 * with fixed options dials in its constructor), else a promise. `nextUrl` is the fixed URL
 * whose turn it is; `signal` (getToken's) aborts when the dial is given up. Throws, or rejects,
 * when a function does, or gives a URL that is not one.
 */
export function prepareDial(
  config: ClientConfig,
  nextUrl: string,
  signal: AbortSignal,
): Dial | Promise<Dial> {
  const { getToken } = config;
  const parts = [
    config.urlOf ? config.urlOf() : nextUrl,
    valueOf(config.protocols),
    valueOf(config.headers),
    getToken?.({ signal }),
  ] as const;
  const build = ([url, protocols, headers, given]: readonly [unknown, ...unknown[]]): Dial => {
    const token = getToken ? usableToken(given) : undefined;
    const inBand = config.tokenTransport === 'in-band';
    return {
      url: checkUrl(url, 'url()', isNativeSocket(config.WebSocket)),
      protocols: withEncoding(config, protocols as Dial['protocols']),
      headers:
        token !== undefined && !inBand
          ? { ...(headers as Dial['headers']), Authorization: `Bearer ${token}` }
          : (headers as Dial['headers']),
      token: inBand ? token : undefined,
    };
  };
  return parts.some(isPromise)
    ? Promise.all(parts.map(async (part) => part)).then((values) => build(values as [unknown]))
    : build(parts);
}

/**
 * What getToken gave, as a token to send (a dial's, `authenticate()`'s, the answer to
 * `rpc.token`). Anything but a non-empty string is a TypeError: a provider failure, retried
 * with the backoff as a provider that throws is. Sent, undefined or an empty string would only
 * be refused without the provider being told (in-band: 4408 with no `rpc.authenticate`, or
 * -32602 for an empty token, again and again).
 */
export function usableToken(given: unknown): string {
  if (typeof given !== 'string') {
    throw new TypeError(`getToken must give a string, not ${typeof given}`);
  }
  if (given === '') throw new TypeError('getToken must give a string, not an empty one');
  return given;
}

/**
 * A socket for `dial`. With `ws`, a refused upgrade's status and the start of its body go to
 * `onRefused` before the socket closes (1006); browsers do not show them. `maxPayload` (the
 * largest message taken) and the headers are options of `ws`'s constructor; a browser's
 * WebSocket takes two arguments and ignores a third.
 */
export function openSocket(
  WebSocket: WebSocketConstructor,
  dial: Dial,
  maxPayload: number,
  onRefused: (refusal: HttpRefusal) => void,
): WebSocketLike {
  const Ctor = WebSocket as new (url: string, protocols?: unknown, options?: object) => object;
  const socket = new Ctor(dial.url, dial.protocols, {
    maxPayload,
    headers: dial.headers,
  }) as WebSocketLike & { on?: (event: string, listener: (...args: never[]) => void) => void };
  socket.on?.('unexpected-response', (_request: unknown, response: Response) => {
    let body = '';
    let told = false;
    const done = (): void => {
      if (told) return;
      told = true;
      onRefused({ status: response.statusCode, body: body.trim() });
      socket.close(); // still connecting: ws aborts the request, then closes with 1006
    };
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => {
      if (body.length < 1024) body += chunk;
    });
    response.once('end', done);
    response.once('error', done);
  });
  return socket;
}

/** The part of Node's IncomingMessage read here. */
interface Response {
  statusCode: number;
  setEncoding(encoding: string): void;
  on(event: 'data', listener: (chunk: string) => void): void;
  once(event: 'end' | 'error', listener: () => void): void;
}

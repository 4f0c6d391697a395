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

/** The codec's subprotocol, then JSON's (what a gateway without the codec answers), then the rest. */
function withEncoding(config: ClientConfig, protocols: Dial['protocols']): Dial['protocols'] {
  const codec = config.encoding;
  if (!codec) return protocols;
  const rest =
    protocols === undefined ? [] : typeof protocols === 'string' ? [protocols] : protocols;
  return [codec.subprotocol, 'jsonrpc-2.0', ...rest.filter((p) => p !== 'jsonrpc-2.0')];
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
  const build = ([url, protocols, headers, token]: readonly [unknown, ...unknown[]]): Dial => {
    if (token !== undefined && typeof token !== 'string') {
      throw new TypeError(`getToken must give a string, not ${typeof token}`);
    }
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

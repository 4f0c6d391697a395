/** How a URL's scheme is carried: WebSocket, HTTP POST, or newline-delimited JSON over TCP. */
export type EndpointKind = 'ws' | 'http' | 'tcp';

/** The server a command talks to, as its messages name it. */
export interface Endpoint {
  readonly url: URL;
  /** `ws` for ws:// and wss://, `http` for http:// and https://, `tcp` for tcp:// and tls://. */
  readonly kind: EndpointKind;
  readonly secure: boolean;
  /** `host:port`, the port filled in when the URL leaves it out. */
  readonly hostPort: string;
  readonly host: string;
  /** The port to connect to; undefined for a tcp:// or tls:// URL without one (there is no default). */
  readonly port: number | undefined;
}

const schemes: Readonly<
  Record<string, { kind: EndpointKind; secure: boolean; port: number | undefined }>
> = {
  'ws:': { kind: 'ws', secure: false, port: 80 },
  'wss:': { kind: 'ws', secure: true, port: 443 },
  'http:': { kind: 'http', secure: false, port: 80 },
  'https:': { kind: 'http', secure: true, port: 443 },
  'tcp:': { kind: 'tcp', secure: false, port: undefined },
  'tls:': { kind: 'tcp', secure: true, port: undefined },
};

/** The endpoint of a URL, or undefined when its scheme is not one the CLI speaks. */
export function endpointOf(url: URL): Endpoint | undefined {
  const scheme = schemes[url.protocol];
  if (!scheme) return undefined;
  const port = url.port === '' ? scheme.port : Number(url.port);
  return {
    url,
    kind: scheme.kind,
    secure: scheme.secure,
    host: url.hostname,
    port,
    hostPort: port === undefined ? url.hostname : `${url.hostname}:${port}`,
  };
}

/** The scheme of the same kind without TLS (`ws://`, `http://`, `tcp://`), or with it. */
export function schemeOf(kind: EndpointKind, secure: boolean): string {
  const plain = { ws: 'ws', http: 'http', tcp: 'tcp' }[kind];
  const tls = { ws: 'wss', http: 'https', tcp: 'tls' }[kind];
  return `${secure ? tls : plain}://`;
}

/** The server a command talks to, as its messages name it. */
export interface Endpoint {
  readonly url: URL;
  /** `ws` for ws:// and wss://, `http` for http:// and https://. */
  readonly kind: 'ws' | 'http';
  readonly secure: boolean;
  /** `host:port`, the port filled in when the URL leaves it out. */
  readonly hostPort: string;
  readonly host: string;
}

const schemes: Readonly<Record<string, { kind: 'ws' | 'http'; secure: boolean; port: number }>> = {
  'ws:': { kind: 'ws', secure: false, port: 80 },
  'wss:': { kind: 'ws', secure: true, port: 443 },
  'http:': { kind: 'http', secure: false, port: 80 },
  'https:': { kind: 'http', secure: true, port: 443 },
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
    hostPort: `${url.hostname}:${port}`,
  };
}

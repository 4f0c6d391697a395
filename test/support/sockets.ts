import { Socket, connect } from 'node:net';
import { WebSocket } from 'ws';
import type { ClientOptions } from 'ws';
import { RawRpc } from './raw-rpc.js';
import type { Resources } from './resources.js';

/** Open a `ws` socket (tracked by `res`) and resolve once it is open; reject on any refusal. */
export async function openSocket(
  res: Resources,
  url: string,
  protocols?: string | string[],
  options: ClientOptions = {},
): Promise<WebSocket> {
  const socket = res.track(new WebSocket(url, protocols, options));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  return socket;
}

/** A RawRpc whose socket `res` closes in cleanup. */
export async function openRaw(res: Resources, url: string): Promise<RawRpc> {
  const raw = await RawRpc.open(url);
  res.track(raw.socket);
  return raw;
}

/**
 * Try an upgrade: 'open' when it succeeds (the socket stays open and tracked),
 * otherwise the HTTP status that refused it.
 */
export function attemptUpgrade(
  res: Resources,
  url: string,
  options: ClientOptions = {},
): Promise<number | 'open'> {
  const socket = res.track(new WebSocket(url, options));
  return new Promise((resolve, reject) => {
    socket.on('error', () => undefined);
    socket.once('open', () => resolve('open'));
    socket.once('unexpected-response', (_req, response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
      socket.terminate();
    });
    socket.once('close', () => reject(new Error('socket closed before a response')));
  });
}

/**
 * Retry an upgrade every few ms until it is admitted (a slot is released
 * asynchronously, once the server side of a closed socket is gone).
 */
export async function connectWhenAdmitted(
  res: Resources,
  url: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const refusals: number[] = [];
  for (;;) {
    const outcome = await attemptUpgrade(res, url);
    if (outcome === 'open') return;
    refusals.push(outcome);
    if (Date.now() > deadline) {
      throw new Error(`never admitted; refused with ${refusals.slice(-3).join(', ')}`);
    }
    await new Promise<void>((resolve) => setTimeout(resolve, 20));
  }
}

export interface UpgradeOutcome {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * Try a WebSocket upgrade with `ws` and report the HTTP response that refused
 * it (the 'unexpected-response' event). Rejects if the upgrade succeeds.
 */
export function upgradeRefusal(
  resources: Resources,
  url: string,
  protocols?: string | string[],
  headers?: Record<string, string>,
): Promise<UpgradeOutcome> {
  const socket = resources.track(new WebSocket(url, protocols, headers ? { headers } : {}));
  return new Promise<UpgradeOutcome>((resolve, reject) => {
    socket.on('error', () => undefined);
    socket.once('open', () => reject(new Error('upgrade unexpectedly succeeded')));
    socket.once('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.once('end', () => {
        const outcome = {
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        };
        socket.once('close', () => resolve(outcome));
        socket.terminate();
      });
    });
  });
}

/** Resolves with the close code and reason of a `ws` socket. */
export function closeOf(socket: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise((resolve) => {
    if (socket.readyState === WebSocket.CLOSED) return resolve({ code: 1006, reason: '' });
    socket.once('close', (code, reason) => resolve({ code, reason: reason.toString('utf8') }));
  });
}

/**
 * A WebSocket client done by hand over TCP: it completes the handshake and
 * then never answers anything, in particular not the server's close frame.
 */
export async function silentWebSocket(
  resources: Resources,
  port: number,
  path = '/rpc',
): Promise<{ socket: Socket; nextData: () => Promise<Buffer> }> {
  const socket = connect(port, '127.0.0.1');
  resources.netSockets.push(socket);
  socket.on('error', () => undefined);
  const chunks: Buffer[] = [];
  const waiters: (() => void)[] = [];
  socket.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    for (const w of waiters.splice(0)) w();
  });
  const nextData = async (): Promise<Buffer> => {
    while (chunks.length === 0) await new Promise<void>((r) => waiters.push(r));
    return chunks.shift()!;
  };
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(
    [
      `GET ${path} HTTP/1.1`,
      `Host: 127.0.0.1:${port}`,
      'Upgrade: websocket',
      'Connection: Upgrade',
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
      'Sec-WebSocket-Version: 13',
      '',
      '',
    ].join('\r\n'),
  );
  const head = (await nextData()).toString('latin1');
  if (!head.startsWith('HTTP/1.1 101')) throw new Error(`handshake failed: ${head}`);
  return { socket, nextData };
}

/** An HTTP answer read raw off the socket, as the server wrote it. */
export interface RawHttpAnswer {
  statusLine: string;
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  body: string;
}

/**
 * Send `head` (a request without a body) on a socket of its own and read the answer up to the
 * server's close, raw (`latin1` keeps every byte as one character, to see what a header holds).
 * `track` is given the socket, to destroy in the test's cleanup.
 */
export function rawHttpExchange(
  port: number,
  head: string,
  track: (socket: Socket) => void,
  encoding: BufferEncoding = 'utf8',
): Promise<RawHttpAnswer> {
  const socket = connect({ port, host: '127.0.0.1' });
  track(socket);
  return new Promise((resolve, reject) => {
    let received = '';
    socket.setEncoding(encoding);
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const [top = '', body = ''] = received.split('\r\n\r\n', 2);
      const [statusLine = '', ...lines] = top.split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ statusLine, status: Number(statusLine.split(' ')[1]), headers, body });
    });
    socket.write(`${head}\r\n\r\n`);
  });
}

/**
 * Limits under which only maxHttpSockets and its share per address close an HTTP socket within
 * a test (its timeouts are ten minutes): `perAddress` sockets for each of `addresses` addresses
 * fill the whole. `bodies`: a body still to come is waited for as long.
 */
export function filledHttpSocketLimits(perAddress: number, addresses: number, bodies = false) {
  return {
    maxHttpSocketsPerIp: perAddress,
    maxHttpSockets: perAddress * addresses,
    headersTimeoutMs: 600_000,
    ...(bodies ? { bodyTimeoutMs: 600_000 } : {}),
  };
}

/**
 * A TCP connection to the gateway's NDJSON port on loopback (`res` destroys it in cleanup), and
 * the lines it has read so far, without their newlines.
 */
export async function tcpLines(
  res: Resources,
  port: number,
): Promise<{ socket: Socket; lines: string[] }> {
  const socket = new Socket();
  res.netSockets.push(socket);
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.connect(port, '127.0.0.1', resolve);
  });
  let text = '';
  const lines: string[] = [];
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
    let end: number;
    while ((end = text.indexOf('\n')) >= 0) {
      lines.push(text.slice(0, end));
      text = text.slice(end + 1);
    }
  });
  return { socket, lines };
}

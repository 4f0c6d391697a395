/**
 * What the client side of a connection (WebSocketTransport: createClient, and the CLI) queues for
 * a server stays bounded: a server that sends requests and never reads the answers makes it stop
 * reading (a `ws` WebSocket, `tcpSocket`) until the server has read enough, then go on; a socket
 * that cannot stop reading (a browser's WebSocket) is closed with 1008 naming the bound, 16 times
 * the pause bound.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { Peer } from '../../src/peer/peer.js';
import { tcpSocket } from '../../src/transport/ndjson-socket.js';
import { WebSocketTransport } from '../../src/transport/websocket-transport.js';
import type { WebSocketLike } from '../../src/transport/websocket-transport.js';
import {
  READ_SLACK,
  tcpNoReadServer as noReadOverTcp,
  wsNoReadServer as noReadOverWs,
} from '../support/no-read-server.js';
import type { NoReadServer } from '../support/no-read-server.js';
import { waitFor } from '../support/waiting.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The bound the client is given: small, so a few hundred requests pass it. */
const MAX_BUFFERED = 256 * 1024;
/** Requests the server sends in all: 16 MiB of answers, far past the bound and the kernel's buffers. */
const REQUESTS = 1024;
const wsNoReadServer = () => noReadOverWs(REQUESTS, cleanups);
const tcpNoReadServer = () => noReadOverTcp(REQUESTS, cleanups);

/** A client Peer (no handlers: it answers -32601) over `socket`, and the peak it ever queued. */
function answeringPeer(socket: WebSocketLike, onMessage: (listener: () => void) => void) {
  const transport = new WebSocketTransport(socket, undefined, { maxBufferedBytes: MAX_BUFFERED });
  const peer = new Peer<undefined>(transport, { session: undefined });
  cleanups.push(() => peer.close());
  const seen = { peak: 0, messages: 0 };
  // Registered after the transport's own handler: sees the queue once the answer is in it.
  onMessage(() => {
    seen.messages++;
    seen.peak = Math.max(seen.peak, socket.bufferedAmount);
  });
  return { transport, peer, seen };
}

async function expectPausedThenResumed(
  server: NoReadServer,
  transport: WebSocketTransport,
  seen: { peak: number; messages: number },
): Promise<void> {
  await waitFor(
    () => transport.readingPaused === true || seen.messages === REQUESTS,
    'the client to stop reading, or to read everything',
  );
  expect(transport.readingPaused).toBe(true);
  expect(seen.peak).toBeLessThanOrEqual(MAX_BUFFERED + READ_SLACK);
  server.startReading();
  await waitFor(
    () => server.answers() === REQUESTS,
    () => `all answers (${server.answers()})`,
  );
  expect(transport.readingPaused).toBe(false);
  expect(seen.peak).toBeLessThanOrEqual(MAX_BUFFERED + READ_SLACK);
}

describe('client transport: a server that sends but never reads', () => {
  it('ws: the client stops reading past maxBufferedBytes, and goes on once the server reads', async () => {
    const server = await wsNoReadServer();
    const socket = new WebSocket(server.url, { perMessageDeflate: false });
    cleanups.push(() => socket.terminate());
    socket.on('error', () => undefined);
    // Attached in the 'open' handler itself: the server's first requests may come with the upgrade.
    const { transport, seen } = await new Promise<ReturnType<typeof answeringPeer>>((resolve) =>
      socket.once('open', () =>
        resolve(
          answeringPeer(socket as unknown as WebSocketLike, (listener) =>
            socket.on('message', listener),
          ),
        ),
      ),
    );
    await expectPausedThenResumed(server, transport, seen);
  });

  it('tcpSocket: the same over newline-delimited JSON', async () => {
    const server = await tcpNoReadServer();
    const TcpSocket = tcpSocket();
    const socket = new TcpSocket(server.url) as WebSocketLike;
    cleanups.push(() => socket.close());
    await new Promise((resolve) => (socket.onopen = resolve));
    const listeners: (() => void)[] = [];
    const { transport, seen } = answeringPeer(socket, (listener) => listeners.push(listener));
    const onmessage = socket.onmessage!;
    socket.onmessage = (event) => {
      onmessage(event);
      for (const listener of listeners) listener();
    };
    await expectPausedThenResumed(server, transport, seen);
  });

  it('a socket that cannot stop reading (a browser WebSocket) is closed with 1008 naming the bound', async () => {
    const server = await wsNoReadServer();
    const ws = new WebSocket(server.url, { perMessageDeflate: false });
    cleanups.push(() => ws.terminate());
    ws.on('error', () => undefined);
    const { seen } = await new Promise<ReturnType<typeof answeringPeer>>((resolve) =>
      ws.once('open', () =>
        resolve(answeringPeer(whatwgOnly(ws), (listener) => ws.on('message', listener))),
      ),
    );
    await waitFor(
      () => ws.readyState !== WebSocket.OPEN || seen.messages === REQUESTS,
      'the client to close, or to read everything',
    );
    expect(ws.readyState).toBe(WebSocket.CLOSING);
    // Past the pause bound it goes on reading (an application's own sends may queue that much),
    // up to 16 times the bound.
    expect(seen.peak).toBeGreaterThan(MAX_BUFFERED + READ_SLACK);
    expect(seen.peak).toBeLessThanOrEqual(16 * MAX_BUFFERED + READ_SLACK);
    // The server reads at last: the answers, then the close frame with the code and reason.
    const serverSide = server.socket()!;
    const closed = new Promise<[number, string]>((resolve) =>
      serverSide.once('close', (code, reason) => resolve([code, reason.toString()])),
    );
    server.startReading();
    const [code, reason] = await closed;
    expect(code).toBe(1008);
    expect(reason).toContain(String(16 * MAX_BUFFERED));
  });
});

/** Only the WHATWG WebSocket surface of a `ws` socket: no pause(), no resume(), no `_socket`. */
function whatwgOnly(ws: WebSocket): WebSocketLike {
  return {
    get readyState() {
      return ws.readyState;
    },
    get bufferedAmount() {
      return ws.bufferedAmount;
    },
    get protocol() {
      return ws.protocol;
    },
    get binaryType() {
      return ws.binaryType;
    },
    set binaryType(value: string) {
      ws.binaryType = value as 'arraybuffer';
    },
    send: (data: string | Uint8Array) => ws.send(data),
    close: (code?: number, reason?: string) => ws.close(code, reason),
    set onopen(handler: ((event: unknown) => void) | null) {
      ws.onopen = handler;
    },
    get onopen() {
      return ws.onopen as ((event: unknown) => void) | null;
    },
    set onmessage(handler: ((event: { data: unknown }) => void) | null) {
      ws.onmessage = handler;
    },
    get onmessage() {
      return ws.onmessage as ((event: { data: unknown }) => void) | null;
    },
    set onclose(handler: ((event: { code: number; reason: string }) => void) | null) {
      ws.onclose = handler;
    },
    get onclose() {
      return ws.onclose as ((event: { code: number; reason: string }) => void) | null;
    },
    set onerror(handler: ((event: unknown) => void) | null) {
      ws.onerror = handler;
    },
    get onerror() {
      return ws.onerror as ((event: unknown) => void) | null;
    },
  };
}

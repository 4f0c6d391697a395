/**
 * createClient's `maxMessageBytes`: the largest message the client takes from the server. A
 * server sends one notification of exactly the bound, then one a byte larger: the first is
 * read, the second closes the connection with 1009 (with `ws` in Node, refused as it arrives).
 * The default, 100 MiB, is what `ws` is given (`ws`'s own). Over the HTTP
 * streaming fallback the same option bounds an event. The option is checked like the others,
 * and the shared client forwards it to its worker.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import type { AddressInfo } from 'node:net';
import { createClient } from '../../src/client/index.js';
import type { RpcClient } from '../../src/client/client.js';
import type { DisconnectEvent } from '../../src/client/authentication.js';
import { resolveClientOptions } from '../../src/client/client-options.js';
import type { ClientOptions } from '../../src/client/client-options.js';
import { resolveSharedClientOptions } from '../../src/client/shared/options.js';
import { sseSocket } from '../../src/client/sse-transport.js';
import type { WebSocketConstructor } from '../../src/transport/websocket-transport.js';
import { startGateway } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const DEFAULT_MAX_MESSAGE_BYTES = 100 * 1024 * 1024;

/** A notification of exactly `bytes` bytes of JSON text (ASCII), its params [n, padding]. */
function notificationOf(bytes: number, n: number): string {
  const empty = JSON.stringify({ jsonrpc: '2.0', method: 'big', params: [n, ''] });
  return JSON.stringify({
    jsonrpc: '2.0',
    method: 'big',
    params: [n, 'x'.repeat(bytes - empty.length)],
  });
}

/** A `ws` server that sends each connection a notification of `bytes`, then one of `bytes + 1`. */
async function sendingServer(bytes: number): Promise<string> {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of server.clients) socket.terminate();
        server.close(() => resolve());
      }),
  );
  server.on('connection', (socket) => {
    socket.send(notificationOf(bytes, 1));
    socket.send(notificationOf(bytes + 1, 2));
  });
  await new Promise((resolve) => server.once('listening', resolve));
  return `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The client, the numbers of the `big` notifications it read, and its disconnects. */
function watchedClient(
  url: string,
  options: Partial<ClientOptions>,
): { client: RpcClient; read: number[]; disconnects: DisconnectEvent[] } {
  const client = createClient({
    url,
    WebSocket: WebSocket as unknown as WebSocketConstructor,
    reconnect: false,
    heartbeat: false,
    ...options,
  });
  cleanups.push(() => client.close());
  const read: number[] = [];
  const disconnects: DisconnectEvent[] = [];
  client.notificationsOf<[number, string]>('big').subscribe(([n]) => read.push(n));
  client.disconnects$.subscribe((event) => disconnects.push(event));
  return { client, read, disconnects };
}

describe('createClient maxMessageBytes', () => {
  it('ws: reads a message of the bound, and closes with 1009 on one a byte larger', async () => {
    const url = await sendingServer(10_000);
    const { read, disconnects } = watchedClient(url, { maxMessageBytes: 10_000 });

    await waitUntil(() => disconnects.length === 1, 'the disconnect');
    expect(read).toEqual([1]);
    expect(disconnects[0]).toMatchObject({ code: 1009, willRetry: false });
  });

  it('gives ws 100 MiB by default, and 0 as no bound', async () => {
    /** The options each socket was made with. */
    const made: { maxPayload?: number }[] = [];
    class Recording extends WebSocket {
      constructor(url: string, protocols?: string | string[], options?: { maxPayload?: number }) {
        super(url, protocols, options);
        made.push(options ?? {});
      }
    }
    const url = await sendingServer(100);
    watchedClient(url, { WebSocket: Recording as unknown as WebSocketConstructor });
    watchedClient(url, {
      WebSocket: Recording as unknown as WebSocketConstructor,
      maxMessageBytes: 0,
    });

    await waitUntil(() => made.length === 2, 'both sockets');
    expect(made.map((options) => options.maxPayload).sort()).toEqual([
      0,
      DEFAULT_MAX_MESSAGE_BYTES,
    ]);
  });

  it('tells any frame ws refuses by the code ws closed with, not 1006: not UTF-8 is 1007', async () => {
    const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    server.on('connection', (socket) =>
      socket.send(Buffer.from([0x22, 0xff, 0x22]), { binary: false }),
    );
    await new Promise((resolve) => server.once('listening', resolve));
    const { disconnects } = watchedClient(
      `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
      {},
    );

    await waitUntil(() => disconnects.length === 1, 'the disconnect');
    expect(disconnects[0]).toMatchObject({ code: 1007 });
  });

  it('0: no bound', async () => {
    const url = await sendingServer(10_000);
    const { client, read } = watchedClient(url, { maxMessageBytes: 0 });

    await waitUntil(() => read.length === 2, 'both notifications');
    expect(client.state).toBe('open');
  });

  it('bounds an event of the HTTP streaming fallback the same way', async () => {
    const { gateway, url } = await startGateway({ routes: { events: '/rpc/events' } });
    cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
    gateway.method('text', ([length]: [number]) => 'x'.repeat(length));
    const { client, disconnects } = watchedClient(url, {
      WebSocket: sseSocket(),
      maxMessageBytes: 10_000,
    });

    expect(await client.call('text', [1_000])).toHaveLength(1_000);
    await expect(client.call('text', [20_000])).rejects.toMatchObject({
      name: 'ConnectionClosedError',
    });
    await waitUntil(() => disconnects.length === 1, 'the disconnect');
    expect(disconnects[0]).toMatchObject({ code: 1009 });
  });

  it('is checked like the other options, and reaches the shared worker', () => {
    const base = {
      url: 'ws://localhost:1',
      WebSocket: WebSocket as unknown as WebSocketConstructor,
    };
    expect(resolveClientOptions(base).maxMessageBytes).toBe(DEFAULT_MAX_MESSAGE_BYTES);
    expect(resolveClientOptions({ ...base, maxMessageBytes: 0 }).maxMessageBytes).toBe(0);
    expect(() => resolveClientOptions({ ...base, maxMessageBytes: -1 })).toThrow(
      'maxMessageBytes must be an integer at least 0, not -1',
    );
    expect(() => resolveClientOptions({ ...base, maxMessageBytes: '1mb' })).toThrow(TypeError);
    const shared = resolveSharedClientOptions({
      url: 'ws://localhost:1',
      workerUrl: 'http://localhost/worker.js',
      maxMessageBytes: 1_000,
    });
    expect(shared.forwarded.maxMessageBytes).toBe(1_000);
    expect(() =>
      resolveSharedClientOptions({
        url: 'ws://localhost:1',
        workerUrl: 'http://localhost/w.js',
        maxMessageBytes: -1,
      }),
    ).toThrow('maxMessageBytes must be an integer at least 0, not -1');
  });
});

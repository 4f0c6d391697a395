/**
 * The order the application made its calls in holds while the client waits: a call refused
 * -32006 on a connection the server asked it to leave goes before the calls made after it, and
 * calls made once connected wait behind queued calls the call table has no room for yet (rather
 * than overtake them, or be refused TooManyPendingCallsError while they wait).
 */
import { afterEach, expect, it } from 'vitest';
import { WebSocket as NodeWebSocket } from 'ws';
import type { WebSocket } from 'ws';
import { sumGateway, waitForState } from '../support/client.js';
import { Resources } from '../support/resources.js';
import { rawWsServer } from '../support/raw-ws-server.js';
import { waitFor } from '../support/waiting.js';

const res = new Resources();
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
  await res.cleanup();
});

it('a call refused -32006 while leaving a connection goes before the calls made after it', async () => {
  const b = await sumGateway(res);
  const order: string[] = [];
  b.gateway.method('record', (params) => void order.push((params as string[])[0]!));
  let refuse: (() => void) | undefined;
  // Server A: the call gets the notice; its refusal comes only once the app has made the next.
  const a = await rawWsServer(cleanups, (socket: WebSocket, text) => {
    const message = JSON.parse(text) as { id?: number; method?: string };
    if (message.method !== 'record') return;
    socket.send(
      JSON.stringify({ jsonrpc: '2.0', method: 'rpc.reconnect', params: { url: b.url } }),
    );
    refuse = () =>
      socket.send(
        JSON.stringify({
          jsonrpc: '2.0',
          error: { code: -32006, message: 'Server shutting down' },
          id: message.id,
        }),
      );
  });
  const client = res.client([a, b.url], { heartbeat: false });
  await client.opened();
  const first = client.call('record', ['first']);
  await waitForState(client, 'reconnecting');
  const second = client.call('record', ['second']);
  await waitFor(() => refuse !== undefined, 'the call on A');
  refuse!();
  await Promise.all([first, second]);
  expect(order).toEqual(['first', 'second']);
});

it('calls made once connected wait behind queued calls waiting for room, in order, none refused', async () => {
  const first = await sumGateway(res);
  const port = first.port;
  await res.gateways.pop()!.close();
  const client = res.client(`ws://127.0.0.1:${port}/rpc`, { maxPendingCalls: 2 });
  const queued = [1, 2, 3, 4].map((n) => client.call('record', [`queued ${n}`]));
  client.notify('record', ['queued notification']);
  const second = await sumGateway(res, {}, port);
  const order: string[] = [];
  second.gateway.method('record', async (params) => {
    order.push((params as string[])[0]!);
    await new Promise((resolve) => setTimeout(resolve, 5));
  });
  await client.opened();
  client.notify('record', ['after notification']);
  const after = client.call('record', ['after call']);
  await Promise.all([...queued, after]);
  await waitFor(() => order.length === 7, 'everything');
  expect(order).toEqual([
    'queued 1',
    'queued 2',
    'queued 3',
    'queued 4',
    'queued notification',
    'after notification',
    'after call',
  ]);
});

/** A WebSocket as a browser's: no EventEmitter, only the on* properties (over ws's). */
class PageSocket {
  readonly #socket: InstanceType<typeof NodeWebSocket>;
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;

  constructor(url: string, protocols?: string | string[]) {
    const socket = new NodeWebSocket(url, protocols);
    this.#socket = socket;
    socket.onopen = (event) => this.onopen?.(event);
    socket.onmessage = (event) => this.onmessage?.({ data: event.data });
    socket.onclose = (event) => this.onclose?.({ code: event.code, reason: event.reason });
    socket.onerror = (event) => this.onerror?.(event);
  }

  get readyState(): number {
    return this.#socket.readyState;
  }
  get bufferedAmount(): number {
    return this.#socket.bufferedAmount;
  }
  get protocol(): string {
    return this.#socket.protocol;
  }
  get binaryType(): string {
    return this.#socket.binaryType;
  }
  set binaryType(type: string) {
    this.#socket.binaryType = type as 'arraybuffer';
  }
  send(data: string | Uint8Array): void {
    this.#socket.send(data);
  }
  close(code?: number, reason?: string): void {
    this.#socket.close(code, reason);
  }
}

it("with a browser's WebSocket, a drain's reconnectUrl written as configured (http:) names that URL", async () => {
  const [a, b, c] = [await sumGateway(res), await sumGateway(res), await sumGateway(res)];
  const httpUrl = (url: string) => url.replace('ws:', 'http:');
  const globals = globalThis as { WebSocket?: unknown };
  const saved = globals.WebSocket;
  globals.WebSocket = PageSocket;
  try {
    const client = res.client([a.url, b.url, c.url].map(httpUrl), {
      WebSocket: undefined,
      heartbeat: false,
    });
    await client.opened();
    await a.gateway.drain({ reconnectUrl: httpUrl(c.url), deadlineMs: 5_000 });
    await waitFor(
      () => b.gateway.sessions.size + c.gateway.sessions.size === 1,
      'the client on its next gateway',
    );
    expect(c.gateway.sessions.size).toBe(1);
    expect(client.url).toBe(c.url);
  } finally {
    globals.WebSocket = saved;
  }
});

/**
 * The client over the HTTP streaming fallback: RpcClient on `sseSocket` (calls, subscriptions,
 * a server-to-client call, a dropped stream resumed with nothing lost), and `fallbackSocket`
 * falling back when the WebSocket cannot open and moving back up once it can.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { ConnectionClosedError, RpcClient, UpgradeRejection } from '../../src/index.js';
import {
  CLOSE_NOTICE_MS,
  MAX_QUEUED_POST_CHARS,
  fallbackSocket,
  sseSocket,
} from '../../src/client/sse-transport.js';
import type {
  WebSocketConstructor,
  WebSocketLike,
} from '../../src/transport/websocket-transport.js';
import { rejectionOf } from '../support/promises.js';
import { startGateway } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  vi.unstubAllGlobals();
});

async function sseGateway() {
  const running = await startGateway({ routes: { events: '/rpc/events' } });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  running.gateway.topic('feed');
  running.gateway.method('add', ([a, b]: [number, number]) => a + b);
  running.gateway.method('ask', async (_params, ctx) => ctx.session.call('client.name', []));
  return running;
}

function client(url: string, WebSocketClass: WebSocketConstructor): RpcClient {
  const rpc = new RpcClient({
    url,
    WebSocket: WebSocketClass,
    reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
    heartbeat: false,
  });
  rpc.method('client.name', () => 'sse-client');
  cleanups.push(() => rpc.close());
  return rpc;
}

const kinds = (gateway: { sessions: ReadonlyMap<string, { transport: { kind: string } }> }) =>
  [...gateway.sessions.values()].map((session) => session.transport.kind);

/** A WebSocket class whose constructor throws, as a page's would where WebSocket is blocked. */
class BlockedWebSocket {
  constructor() {
    throw new Error('WebSocket is blocked here');
  }
}

describe('HTTP streaming fallback (client)', () => {
  it('runs calls, subscriptions and a server-to-client call over sseSocket', async () => {
    const { gateway, url } = await sseGateway();
    const rpc = client(url, sseSocket());
    expect(await rpc.call('add', [2, 3])).toBe(5);
    expect(kinds(gateway)).toEqual(['sse']);
    expect(await rpc.call('ask')).toBe('sse-client');
    const seen: number[] = [];
    const subscription = rpc.subscribe<number>('feed').subscribe((n) => seen.push(n));
    cleanups.push(() => subscription.unsubscribe());
    await waitUntil(async () => {
      await gateway.publish('feed', 0);
      return seen.length > 0;
    }, 'the first message');
    for (let n = 1; n <= 5; n++) await gateway.publish('feed', n);
    await waitUntil(() => seen.at(-1) === 5, 'five messages');
    expect(seen.filter((n) => n > 0)).toEqual([1, 2, 3, 4, 5]);
  });

  it('resumes a dropped stream with nothing lost, on the same session', async () => {
    const { gateway, url } = await sseGateway();
    const rpc = client(url, sseSocket());
    const seen: number[] = [];
    const subscription = rpc.subscribe<number>('feed').subscribe((n) => seen.push(n));
    cleanups.push(() => subscription.unsubscribe());
    await waitUntil(async () => {
      await gateway.publish('feed', 0);
      return seen.length > 0;
    }, 'the first message');
    const session = [...gateway.sessions.values()][0]!;
    const transport = session.transport as unknown as { stream?: { destroy(): void } };
    transport.stream!.destroy(); // the stream drops (a proxy cut it, say)
    for (let n = 1; n <= 5; n++) await gateway.publish('feed', n);
    await waitUntil(() => seen.at(-1) === 5, 'five messages');
    expect(seen.filter((n) => n > 0)).toEqual([1, 2, 3, 4, 5]);
    expect([...gateway.sessions.keys()]).toEqual([session.id]);
  });

  it('falls back to the HTTP stream when the WebSocket constructor throws', async () => {
    const { gateway, url } = await sseGateway();
    const rpc = client(url, fallbackSocket({ WebSocket: BlockedWebSocket }));
    expect(await rpc.call('add', [1, 1])).toBe(2);
    expect(kinds(gateway)).toEqual(['sse']);
  });

  it('falls back when the upgrade is refused, and moves back up once WebSocket works', async () => {
    const { gateway, url } = await sseGateway();
    let blocked = true;
    // Upgrades go to a path that answers 404 while "blocked".
    class FlakyWebSocket extends WebSocket {
      constructor(target: string, protocols?: string | string[]) {
        super(blocked ? target.replace(/\/rpc$/, '/blocked') : target, protocols);
      }
    }
    const rpc = client(
      url,
      fallbackSocket({ WebSocket: FlakyWebSocket, probeDelayMs: 50, maxProbeDelayMs: 100 }),
    );
    expect(await rpc.call('add', [1, 2])).toBe(3);
    expect(kinds(gateway)).toEqual(['sse']);
    blocked = false;
    await waitUntil(() => kinds(gateway).join() === 'websocket', 'the move to WebSocket');
    expect(await rpc.call('add', [2, 2])).toBe(4);
  });

  it('authenticates in-band (rpc.authenticate) over the event stream', async () => {
    const running = await startGateway<{ user: string }>({
      routes: { events: '/rpc/events' },
      identity: { inBand: true },
      authenticate: ({ token }) => {
        if (token === 'ann-token') return { user: 'ann' };
        throw new UpgradeRejection(401, 'unknown token');
      },
    });
    cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
    running.gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
    const rpc = new RpcClient({
      url: running.url,
      WebSocket: sseSocket(),
      getToken: () => 'ann-token',
      heartbeat: false,
    });
    cleanups.push(() => rpc.close());
    expect(await rpc.call('whoami')).toBe('ann');
    expect(kinds(running.gateway)).toEqual(['sse']);
  });

  it('ends the server session when the client closes', async () => {
    const { gateway, url } = await sseGateway();
    const rpc = client(url, sseSocket());
    await rpc.call('add', [1, 1]);
    expect(gateway.sessions.size).toBe(1);
    await rpc.close();
    await waitUntil(() => gateway.sessions.size === 0, 'the session closed', 2_000);
  });
});

/**
 * fetch, with every request's method recorded, and POSTs (`holdPosts`) or the DELETE
 * (`holdDelete`) held until aborted; `aborted` names those given up.
 */
function watchedFetch(options: { holdPosts?: boolean; holdDelete?: boolean } = {}) {
  const methods: string[] = [];
  const aborted: string[] = [];
  const watched = (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const method = init?.method ?? 'GET';
    methods.push(method);
    if (method === 'DELETE' && options.holdDelete) {
      return new Promise((_resolve, reject) => {
        init?.signal?.addEventListener('abort', () => {
          aborted.push(method);
          reject(new Error('aborted'));
        });
      });
    }
    if (method === 'POST' && options.holdPosts) {
      return new Promise((_resolve, reject) => {
        init?.signal?.addEventListener('abort', () => reject(new Error('aborted')));
      });
    }
    return fetch(input, init);
  };
  return { fetch: watched as typeof fetch, methods, aborted };
}

describe('HTTP streaming fallback (client): its bounds and its handlers', () => {
  it('closes (1008) rather than hold more than MAX_QUEUED_POST_CHARS waiting to be POSTed', async () => {
    const { gateway, url } = await sseGateway();
    const { fetch: held, methods } = watchedFetch({ holdPosts: true });
    const rpc = new RpcClient({
      url,
      WebSocket: sseSocket({ fetch: held }),
      reconnect: false,
      heartbeat: false,
    });
    cleanups.push(() => rpc.close());
    await rpc.opened();
    const big = 'x'.repeat(512 * 1024);
    const count = Math.ceil(MAX_QUEUED_POST_CHARS / big.length) + 1;
    const calls = Array.from({ length: count }, () => rejectionOf(rpc.call('add', [big, 1])));
    // Every call rejects: those the socket took with its close (1008), the one that found it
    // closing as the client saw it go.
    const errors = await Promise.all(calls);
    for (const err of errors.slice(0, -1)) {
      expect(err).toBeInstanceOf(ConnectionClosedError);
      expect((err as ConnectionClosedError).closeCode).toBe(1008);
    }
    expect(errors.at(-1)).toBeInstanceOf(Error);
    expect(rpc.lastDisconnect).toMatchObject({ code: 1008, reason: expect.stringMatching(/POST/) });
    // The server hears of it at once (DELETE), not after its grace period.
    await waitUntil(() => gateway.sessions.size === 0, 'the session ended');
    expect(methods.filter((m) => m === 'POST').length).toBeLessThan(count);
    expect(methods).toContain('DELETE');
  });

  it('gives up the DELETE that tells the server of a close after CLOSE_NOTICE_MS', async () => {
    const { url } = await sseGateway();
    const { fetch: held, methods, aborted } = watchedFetch({ holdDelete: true });
    const rpc = new RpcClient({
      url,
      WebSocket: sseSocket({ fetch: held }),
      reconnect: false,
      heartbeat: false,
    });
    await rpc.opened();
    const closedAt = performance.now();
    await rpc.close();
    await waitUntil(() => methods.includes('DELETE'), 'the DELETE');
    await waitUntil(() => aborted.length === 1, 'the DELETE given up', CLOSE_NOTICE_MS + 5_000);
    // Given up by its deadline, not at once (the server would never hear of the close).
    expect(performance.now() - closedAt).toBeGreaterThanOrEqual(CLOSE_NOTICE_MS - 50);
  }, 20_000);

  it('reports what a handler throws and reads on: no resume, nothing lost', async () => {
    const { gateway, url } = await sseGateway();
    const reported: unknown[] = [];
    vi.stubGlobal('reportError', (err: unknown) => reported.push(err));
    const { fetch: watched, methods } = watchedFetch();
    const Socket = sseSocket({ fetch: watched }) as new (url: string) => WebSocketLike;
    const socket = new Socket(url);
    cleanups.push(() => socket.close());
    const seen: unknown[] = [];
    const opened = new Promise<void>((resolve) => {
      socket.onopen = () => {
        resolve();
        throw new Error('onopen is broken');
      };
    });
    socket.onmessage = (event) => {
      seen.push(JSON.parse(String(event.data)));
      if (seen.length === 1) throw new Error('onmessage is broken');
    };
    await opened;
    const session = [...gateway.sessions.values()][0]!;
    for (let n = 1; n <= 3; n++) session.notify('tick', [n]);
    await waitUntil(() => seen.length === 3, 'three notifications');
    expect(seen.map((m) => (m as { params: number[] }).params[0])).toEqual([1, 2, 3]);
    expect(reported.map((err) => (err as Error).message)).toEqual([
      'onopen is broken',
      'onmessage is broken',
    ]);
    // One GET: the stream was never taken for dropped.
    expect(methods).toEqual(['GET']);
    expect(socket.readyState).toBe(1);
  });
});

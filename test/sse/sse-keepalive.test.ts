/**
 * An event stream's client that is gone without a word (a phone off its network: no FIN, no
 * RST, its TCP connection left to time out for a quarter of an hour) must not hold its session,
 * and the per-address and per-user slots with it. A client that asks for it on its opening GET
 * (`x-wsrpc-keepalive`, as this project's client does) is told in its session event how often
 * to be heard from (`keepaliveMs`, the heartbeat's interval); the heartbeat gives its session up
 * (1001, "no word from the client") after three visits without a request naming the session.
 * This project's client, heard from by its keepalive POSTs when it sends nothing else, stays;
 * a client that did not ask is never given up this way.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/client.js';
import { sseSocket } from '../../src/client/sse-transport.js';
import { sleep } from '../support/promises.js';
import { startGateway } from '../support/gateway.js';
import { waitFor } from '../support/waiting.js';
import { openStream } from './sse-raw.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const INTERVAL_MS = 300;

async function gateway() {
  const running = await startGateway({
    routes: { events: '/rpc/events' },
    heartbeatIntervalMs: INTERVAL_MS,
  });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  return { ...running, events: `http://127.0.0.1:${running.port}/rpc/events` };
}

describe('HTTP streaming fallback: keepalives', () => {
  it('a client that asked for them and then says nothing is given up (1001), its slot freed', async () => {
    const { gateway: gw, events } = await gateway();
    const stream = await openStream(events, { headers: { 'x-wsrpc-keepalive': '1' } });
    cleanups.push(() => stream.destroy());
    expect(stream.session).toMatchObject({ keepaliveMs: INTERVAL_MS });
    const closed = await stream.until((all) => all.some((e) => e.event === 'close'));
    expect(JSON.parse(closed.find((e) => e.event === 'close')!.data)).toEqual({
      code: 1001,
      reason: 'no word from the client',
    });
    await waitFor(() => gw.sessions.size === 0, 'the session gone');
  });

  it('a client that did not ask for them is not given up for its silence', async () => {
    const { gateway: gw, events } = await gateway();
    const stream = await openStream(events);
    cleanups.push(() => stream.destroy());
    expect(stream.session).not.toHaveProperty('keepaliveMs');
    await sleep(INTERVAL_MS * 10);
    expect(gw.sessions.size).toBe(1);
    expect(stream.events.some((e) => e.event === 'close')).toBe(false);
  });

  it("this project's client, sending nothing else, keeps its session by its keepalives", async () => {
    const { gateway: gw, url } = await gateway();
    let keepalives = 0;
    const counting = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const headers = (init?.headers ?? {}) as Record<string, string>;
      if (init?.method === 'POST' && headers['x-wsrpc-keepalive']) keepalives++;
      return fetch(input, init);
    }) as typeof fetch;
    const rpc = new RpcClient({
      url,
      WebSocket: sseSocket({ fetch: counting }),
      reconnect: false,
      heartbeat: false,
    });
    cleanups.push(() => rpc.close());
    await rpc.opened();
    await sleep(INTERVAL_MS * 10);
    expect(rpc.state).toBe('open');
    expect(gw.sessions.size).toBe(1);
    expect(rpc.lastDisconnect).toBeUndefined();
    expect(keepalives).toBeGreaterThan(0);
  });

  it("this project's client has one keepalive POST out at a time, and gives up one that hangs after keepaliveMs: the next keep its session", async () => {
    const { gateway: gw, url } = await gateway();
    const out = { now: 0, most: 0, sent: 0, givenUp: 0 };
    // The first keepalive POST is never answered (a proxy that holds it, a dead pooled
    // connection) until the client lets it go; the ones after it reach the gateway.
    const holdingFirst = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const headers = (init?.headers ?? {}) as Record<string, string>;
      if (init?.method !== 'POST' || !headers['x-wsrpc-keepalive']) return fetch(input, init);
      out.sent++;
      out.most = Math.max(out.most, ++out.now);
      try {
        if (out.sent > 1) return await fetch(input, init);
        return await new Promise<Response>((_, reject) =>
          init.signal?.addEventListener('abort', () => {
            out.givenUp++;
            reject(new Error('aborted'));
          }),
        );
      } finally {
        out.now--;
      }
    }) as typeof fetch;
    const rpc = new RpcClient({
      url,
      WebSocket: sseSocket({ fetch: holdingFirst }),
      reconnect: false,
      heartbeat: false,
    });
    cleanups.push(() => rpc.close());
    await rpc.opened();
    await waitFor(() => out.givenUp === 1, 'the held keepalive given up');
    await waitFor(() => out.sent > 1, 'the next keepalive');
    // Past the gateway's window many times over: its session is kept by the later keepalives.
    await sleep(INTERVAL_MS * 10);
    expect(rpc.state).toBe('open');
    expect(gw.sessions.size).toBe(1);
    expect(rpc.lastDisconnect).toBeUndefined();
    expect(out.most).toBe(1);
  });
});

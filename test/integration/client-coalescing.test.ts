import type { WsTransport } from '../../src/transport/ws-transport.js';
import { afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import type { RpcClient } from '../../src/client/client.js';
import { waitUntil } from '../support/waiting.js';
import { Resources } from '../support/resources.js';
import { MAX_GATHERED_FRAMES } from '../../src/transport/turn-coalescer.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** Record every WebSocket message the server receives on its only session. */
async function recordIncoming(gateway: Gateway) {
  await waitUntil(() => gateway.sessions.size === 1, 'the session to open');
  const session = [...gateway.sessions.values()][0]!;
  const ws = (session.transport as WsTransport).socket;
  const seen = { messages: [] as string[] };
  ws.on('message', (data: Buffer) => seen.messages.push(data.toString('utf8')));
  return seen;
}

/** Count the write system calls of the client's current socket. */
function countClientWrites(client: RpcClient): { count: number } {
  const socket = (client as unknown as { socket: { _socket: Record<string, unknown> } }).socket;
  const raw = socket._socket;
  const counter = { count: 0 };
  for (const name of ['_write', '_writev'] as const) {
    const original = raw[name] as (...args: unknown[]) => unknown;
    raw[name] = function (this: unknown, ...args: unknown[]) {
      counter.count++;
      return original.apply(this, args);
    };
  }
  return counter;
}

describe('client write coalescing', () => {
  it('in Node, writes a lone call before the event loop reaches its check phase', async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('echo', (params) => params);
    const client = res.client(url);
    await client.opened();
    const writes = countClientWrites(client);

    // Queued before the call is made: an uncork in a setImmediate would run after this.
    const seenAtCheck = new Promise<number>((resolve) => setImmediate(() => resolve(writes.count)));
    const reply = client.call('echo', ['solo']);

    expect(await seenAtCheck).toBe(1);
    expect(await reply).toEqual(['solo']);
  });

  it('in Node, corks: 64 calls made in one task leave in writes of 16', async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('echo', (params) => params);
    const client = res.client(url);
    await client.opened();
    const seen = await recordIncoming(gateway);
    const writes = countClientWrites(client);

    const results = await Promise.all(
      Array.from({ length: 64 }, (_, i) => client.call('echo', [i])),
    );

    expect(results).toEqual(Array.from({ length: 64 }, (_, i) => [i]));
    expect(seen.messages).toHaveLength(64);
    // One write per call without corking; one per 16 (the server starts on the first 16 while
    // the rest are made) with it.
    expect(writes.count).toBe(64 / MAX_GATHERED_FRAMES);
  });

  it('with batchCalls, gathers the calls and notifications of one turn into batch frames', async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('echo', (params) => params);
    const client = res.client(url, { batchCalls: 10 });
    await client.opened();
    const seen = await recordIncoming(gateway);

    const calls = Array.from({ length: 25 }, (_, i) => client.call('echo', [i]));
    client.notify('note', [1]);
    const results = await Promise.all(calls);

    expect(results).toEqual(Array.from({ length: 25 }, (_, i) => [i]));
    // 26 members, at most 10 per frame: three batch frames.
    const frames = seen.messages.map((m) => JSON.parse(m) as unknown);
    expect(frames.map((f) => (Array.isArray(f) ? f.length : 1))).toEqual([10, 10, 6]);
    // A call alone in its turn still goes out as a plain request.
    expect(await client.call('echo', ['solo'])).toEqual(['solo']);
    expect(Array.isArray(JSON.parse(seen.messages.at(-1)!))).toBe(false);
  });
});

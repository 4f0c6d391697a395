/**
 * limits.newTopicSubscribesPerSecondPerIp / newTopicSubscribesBurstPerIp: the new-topic
 * subscribes of all connections from one address group come out of one bucket as well as each
 * connection's own, so neither opening many connections nor closing one and opening another
 * (whose own bucket starts full) gives an address more. Other addresses are not affected.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { resolveLimits } from '../../src/server/options.js';
import type { WireFrame } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { openSocket } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const BURST_PER_IP = 5;

/** A JSON-RPC connection from `localAddress` (a loopback address of its own). */
async function connectFrom(url: string, localAddress: string) {
  const socket: WebSocket = await openSocket(res, url, undefined, { localAddress });
  const frames: WireFrame[] = [];
  socket.on('message', (data) =>
    frames.push(JSON.parse((data as Buffer).toString('utf8')) as WireFrame),
  );
  let lastId = 0;
  return {
    socket,
    async subscribe(topic: string): Promise<WireFrame> {
      const id = ++lastId;
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'subscribe', params: [topic] }));
      await waitUntil(() => frames.some((f) => f.id === id), `the answer to subscribe ${topic}`);
      return frames.find((f) => f.id === id)!;
    },
    async close(): Promise<void> {
      socket.close();
      await new Promise((resolve) => socket.once('close', resolve));
    },
  };
}

async function perAddressGateway() {
  const running = await res.gateway({
    limits: {
      // The connection's own bucket never binds here: only the address's does.
      newTopicSubscribesPerSecond: 0.001,
      newTopicSubscribesBurst: 1_000,
      newTopicSubscribesPerSecondPerIp: 0.001,
      newTopicSubscribesBurstPerIp: BURST_PER_IP,
    },
  });
  running.gateway.topic('t.*');
  return running;
}

describe('new-topic subscribes per address group', () => {
  it('share one budget across reconnects from an address; another address keeps its own', async () => {
    const { gateway, url } = await perAddressGateway();
    let topic = 0;
    // Close and reconnect after each subscribe: every connection starts with a full bucket of
    // its own, the address's goes on emptying.
    for (let i = 0; i < BURST_PER_IP; i++) {
      const client = await connectFrom(url, '127.0.0.2');
      expect(typeof (await client.subscribe(`t.${++topic}`)).result).toBe('string');
      await client.close();
      await waitUntil(() => gateway.sessions.size === 0, 'the session to close');
    }
    const again = await connectFrom(url, '127.0.0.2');
    const refused = await again.subscribe(`t.${++topic}`);
    expect(refused.error).toEqual({
      code: -32003,
      message:
        'Rate limited: connections from this address subscribe to new topics too fast (limits.newTopicSubscribesPerSecondPerIp)',
      data: { topic: `t.${topic}`, limit: 0.001 },
    });
    // A second connection from the address at once: the same budget.
    const second = await connectFrom(url, '127.0.0.2');
    expect((await second.subscribe(`t.${topic + 1}`)).error?.code).toBe(-32003);

    const other = await connectFrom(url, '127.0.0.3');
    for (let i = 0; i < BURST_PER_IP; i++) {
      expect(typeof (await other.subscribe(`t.other.${i}`)).result).toBe('string');
    }
    expect((await other.subscribe('t.other.last')).error?.code).toBe(-32003);
    // A topic the node holds already costs nothing.
    expect(typeof (await second.subscribe('t.other.0')).result).toBe('string');
  });

  it('refuses on the connection’s own budget with its own message, leaving the address’s', async () => {
    const { gateway, url } = await res.gateway({
      limits: {
        newTopicSubscribesPerSecond: 0.001,
        newTopicSubscribesBurst: 2,
        newTopicSubscribesPerSecondPerIp: 0.001,
        newTopicSubscribesBurstPerIp: 3,
      },
    });
    gateway.topic('t.*');
    const first = await connectFrom(url, '127.0.0.4');
    expect(typeof (await first.subscribe('t.1')).result).toBe('string');
    expect(typeof (await first.subscribe('t.2')).result).toBe('string');
    expect((await first.subscribe('t.3')).error).toEqual({
      code: -32003,
      message:
        'Rate limited: this connection subscribes to new topics too fast (limits.newTopicSubscribesPerSecond)',
      data: { topic: 't.3', limit: 0.001 },
    });
    // The refusal took nothing from the address: one is left for another connection.
    const second = await connectFrom(url, '127.0.0.4');
    expect(typeof (await second.subscribe('t.4')).result).toBe('string');
    expect((await second.subscribe('t.5')).error?.data).toEqual({ topic: 't.5', limit: 0.001 });
  });

  it('are options of their own, 0 to turn the per-address budget off', () => {
    const resolved = resolveLimits({});
    expect(resolved.newTopicSubscribesPerSecondPerIp).toBe(50);
    expect(resolved.newTopicSubscribesBurstPerIp).toBe(1_000);
    expect(
      resolveLimits({ newTopicSubscribesPerSecondPerIp: 0 }).newTopicSubscribesPerSecondPerIp,
    ).toBe(0);
    expect(() => resolveLimits({ newTopicSubscribesBurstPerIp: 0 })).toThrow(
      'limits.newTopicSubscribesBurstPerIp must be a number at least 1, not 0',
    );
  });
});

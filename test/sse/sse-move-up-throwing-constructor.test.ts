/**
 * fallbackSocket's background attempts to move back to WebSocket, with a WebSocket constructor
 * that throws (a URL it rejects, a port a browser blocks: SecurityError): each throw is one
 * failed attempt, the next comes after the backoff, and once the constructor works the client
 * moves up.
 */
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/client.js';
import { fallbackSocket } from '../../src/client/sse-transport.js';
import { startGateway } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';
import { kinds } from './move-up.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A `ws` class whose constructor throws until `allow()`, as a browser's does for a blocked port. */
function throwingWebSocket() {
  let allowed = false;
  let thrown = 0;
  class Throwing extends WebSocket {
    constructor(url: string, protocols?: string | string[], init?: object) {
      if (!allowed) {
        thrown++;
        throw new Error('SecurityError: the port is blocked');
      }
      super(url, protocols, init);
    }
  }
  return {
    WebSocket: Throwing,
    allow: () => (allowed = true),
    get thrown() {
      return thrown;
    },
  };
}

describe('fallbackSocket: a WebSocket constructor that throws', () => {
  it('counts each throw as a failed attempt and keeps trying; the client moves up once it works', async () => {
    const running = await startGateway({ routes: { events: '/rpc/events' } });
    cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
    running.gateway.method('add', ([a, b]: [number, number]) => a + b);
    const throwing = throwingWebSocket();
    const rpc = new RpcClient({
      url: running.url,
      WebSocket: fallbackSocket({
        WebSocket: throwing.WebSocket,
        probeDelayMs: 10,
        maxProbeDelayMs: 40,
      }),
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
      heartbeat: false,
    });
    cleanups.push(() => rpc.close());
    await rpc.opened();
    expect(kinds(running.gateway)).toEqual(['sse']);
    // The first throw is the opening attempt; those after it are the background ones.
    await waitUntil(() => throwing.thrown >= 4, 'three background attempts');
    expect(kinds(running.gateway)).toEqual(['sse']);
    throwing.allow();
    await waitUntil(() => kinds(running.gateway).join() === 'websocket', 'the move to WebSocket');
    expect(await rpc.call('add', [2, 3])).toBe(5);
  });
});

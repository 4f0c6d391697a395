import type { WsTransport } from '../../src/transport/ws-transport.js';
import type { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import type { Session } from '../../src/server/session.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitUntil } from '../support/waiting.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** Count the write system calls Node makes for one session's socket. */
function countWrites(gateway: Gateway, session: Session): { writes: number } {
  const raw = (
    (session.transport as WsTransport).socket as unknown as { _socket: Record<string, unknown> }
  )._socket;
  const counter = { writes: 0 };
  for (const name of ['_write', '_writev'] as const) {
    const original = raw[name] as (...args: unknown[]) => unknown;
    raw[name] = function (this: unknown, ...args: unknown[]) {
      counter.writes++;
      return original.apply(this, args);
    };
  }
  return counter;
}

async function onlySession(gateway: Gateway): Promise<Session> {
  await waitUntil(() => gateway.sessions.size === 1, 'the session to open');
  return [...gateway.sessions.values()][0]!;
}

describe('per-turn write coalescing', () => {
  it('answers 64 pipelined requests that arrive together with far fewer writes, in order', async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('echo', (params) => params);
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const counter = countWrites(gateway, await onlySession(gateway));

    // Put all 64 frames into one TCP write from the client.
    const clientSocket = (raw.socket as unknown as { _socket: Duplex })._socket;
    clientSocket.cork();
    for (let id = 1; id <= 64; id++) {
      raw.socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'echo', params: [id], id }));
    }
    clientSocket.uncork();
    await raw.until(() => raw.frames.length === 64, 'all 64 replies');

    expect(raw.frames.map((f) => (f as { id: number }).id)).toEqual(
      Array.from({ length: 64 }, (_, i) => i + 1),
    );
    // One write per reply without coalescing; a handful at most with it (TCP may split the input).
    expect(counter.writes).toBeLessThanOrEqual(8);
  });

  it('sends a burst of publishes made in one turn to a subscriber in a few writes', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('burst');
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const id = (await raw.request('subscribe', ['burst'])).result as string;
    const counter = countWrites(gateway, await onlySession(gateway));

    for (let n = 1; n <= 50; n++) void gateway.publish('burst', n);
    await raw.until(() => raw.notifications(id).length === 50, 'all 50 messages');

    expect(raw.notifications(id).map((m) => m.result)).toEqual(
      Array.from({ length: 50 }, (_, i) => i + 1),
    );
    expect(counter.writes).toBeLessThanOrEqual(2);
  });

  it('does not hold large frames back: past 64 KiB a corked turn is written at once', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('big');
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const id = (await raw.request('subscribe', ['big'])).result as string;
    const session = await onlySession(gateway);
    const counter = countWrites(gateway, session);
    const pad = 'x'.repeat(100 * 1024);

    let maxBuffered = 0;
    for (let n = 1; n <= 5; n++) {
      void gateway.publish('big', { n, pad });
      maxBuffered = Math.max(maxBuffered, session.peer.bufferedAmount);
    }
    await raw.until(() => raw.notifications(id).length === 5, 'all 5 large messages');

    expect(raw.notifications(id).map((m) => (m.result as { n: number }).n)).toEqual([
      1, 2, 3, 4, 5,
    ]);
    expect(raw.notifications(id).every((m) => m.missed === undefined)).toBe(true);
    // Each large frame went out on its own write instead of waiting for the end of the turn.
    expect(counter.writes).toBeGreaterThanOrEqual(5);
  });
});

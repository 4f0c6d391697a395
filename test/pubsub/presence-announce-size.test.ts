/**
 * A node's presence announcement carries every change of one write: on close, or after a lapse,
 * its whole membership of a topic. Sent as one message it could pass the broker's message bound
 * (NATS's max_payload, 1 MiB) and reach no watcher; it goes in messages of at most
 * ANNOUNCE_BYTES, so a watcher on another node sees every member leave.
 */
import { nanoid } from 'nanoid';
import { afterEach, expect, it } from 'vitest';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import type { PresenceEvent } from '../../src/server/presence-window.js';
import { NATS_URL, deleteNatsStreams } from '../support/brokers.js';
import { startGateway } from '../support/gateway.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitFor } from '../support/waiting.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it('a node with 1,200 members of 1 KiB of info each closes: a watcher on another node sees them leave', async () => {
  const prefix = `announce${nanoid(6)}`;
  // The topic streams and the presence bucket's.
  cleanups.push(() => deleteNatsStreams(prefix));
  const nodes = [];
  for (let i = 0; i < 2; i++) {
    const broker = await NatsBroker.connect({ servers: NATS_URL, prefix });
    const running = await startGateway({ broker, presenceCoalesceMs: 100 });
    running.gateway.topic('room.*', { presence: { info: () => ({ pad: 'x'.repeat(990) }) } });
    cleanups.push(async () => {
      await running.gateway.close();
      await broker.close().catch(() => undefined);
    });
    nodes.push(running);
  }
  const [a, b] = nodes as [(typeof nodes)[0], (typeof nodes)[0]];
  const events: PresenceEvent[] = [];
  const watching = b.gateway.presence('room.1').events$.subscribe((e) => events.push(e));
  cleanups.push(() => watching.unsubscribe());
  for (let c = 0; c < 12; c++) {
    const raw = await RawRpc.open(a.url);
    cleanups.push(() => raw.close());
    for (let i = 0; i < 100; i += 20) {
      await Promise.all(Array.from({ length: 20 }, () => raw.request('subscribe', ['room.1'])));
    }
  }
  await waitFor(
    async () => (await b.gateway.presence('room.1').count()) === 1200,
    '1,200 members',
    20_000,
  );
  // The watcher must have seen every join before the close: a join and its leave in one window
  // cancel out, and would leave nothing to see.
  const changes = (list: PresenceEvent[], side: 'joined' | 'left') =>
    list.reduce((sum, e) => sum + e[side].length + (e.truncated ?? 0), 0);
  await waitFor(
    () => changes(events, 'joined') >= 1200,
    'the joins seen on the other node',
    20_000,
  );
  const before = events.length;
  await a.gateway.close();
  await waitFor(() => events.at(-1)?.count === 0, 'the leaves seen on the other node', 20_000);
  expect(changes(events.slice(before), 'left')).toBe(1200);
}, 60_000);

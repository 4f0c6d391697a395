/**
 * A `$presence` subscription's first page is read once the node listens for the topic's joins
 * and leaves: the broker's subscribe to them takes a round trip (Redis's SUBSCRIBE, NATS's SUB),
 * and a member who joined after a page read before it, while the node was not listening yet,
 * was in neither the page nor any event. The watcher then listed one member fewer than every
 * count it was told, until that member left.
 */
import { afterEach, expect, it } from 'vitest';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { PRESENCE_EVENTS_PREFIX } from '../../src/pubsub/presence.js';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { waitFor } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

interface View {
  count: number;
  members?: { sessionId: string }[];
  joined?: { sessionId: string }[];
  left?: { sessionId: string }[];
}

it('a member who joins while the node starts listening is in the first page or in an event', async () => {
  const broker = new MemoryBroker();
  // The node's subscribe to the topic's joins and leaves completes when let go, as a remote
  // broker's does after its round trip.
  const subscribe = broker.subscribe.bind(broker);
  let letGo!: () => void;
  const listening = new Promise<void>((resolve) => (letGo = resolve));
  broker.subscribe = async (channel, handler) => {
    if (channel.startsWith(PRESENCE_EVENTS_PREFIX)) await listening;
    return subscribe(channel, handler);
  };
  // The join's announcement, published once its write is done.
  const publish = broker.publish.bind(broker);
  let announced = 0;
  broker.publish = async (...args: Parameters<typeof broker.publish>) => {
    const published = await publish(...args);
    if (args[0] === `${PRESENCE_EVENTS_PREFIX}room.1`) announced++;
    return published;
  };
  const { gateway, url } = await res.gateway({ broker });
  gateway.topic('room.*', { presence: true });
  const watcher = await RawRpc.open(url);
  res.track(watcher.socket);
  const id = (await watcher.request('subscribe', ['$presence', { topic: 'room.1' }]))
    .result as string;

  // Joins while the node's subscribe is under way: written to the store, announced to no one here.
  const first = await RawRpc.open(url);
  res.track(first.socket);
  await first.request('subscribe', ['room.1']);
  await waitFor(() => announced === 1, 'the first join announced');
  expect(await gateway.presence('room.1').count()).toBe(1);
  letGo();

  // Joins once the node listens.
  const second = await RawRpc.open(url);
  res.track(second.socket);
  await second.request('subscribe', ['room.1']);
  await watcher.until(
    () => watcher.notifications(id).some((n) => (n.result as View).count === 2),
    'an event with both members',
  );

  // What the watcher was told adds up to what it was told the count is.
  const listed = new Set<string>();
  let count = -1;
  for (const { result } of watcher.notifications(id)) {
    const view = result as View;
    for (const m of [...(view.members ?? []), ...(view.joined ?? [])]) listed.add(m.sessionId);
    for (const m of view.left ?? []) listed.delete(m.sessionId);
    count = view.count;
  }
  expect(count).toBe(2);
  expect(listed.size).toBe(2);
});

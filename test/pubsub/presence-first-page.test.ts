/**
 * The first page of a `$presence` subscription (count and members) is read from the presence
 * store. A client subscribing in a loop asked for one read each, never cancelled: enough of
 * them kept Redis too busy for anyone else. The reads of a topic are now one at a time, shared
 * by the subscribers that came before it started, and at most MAX_PRESENCE_FIRST_PAGE_READS run
 * on the node; every subscriber still gets its own first page.
 */
import { afterEach, expect, it } from 'vitest';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { MAX_PRESENCE_FIRST_PAGE_READS } from '../../src/server/presence-service.js';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

it('a storm of $presence subscribes to 12 topics: one read per topic at a time, at most 8 on the node, a first page each', async () => {
  const broker = new MemoryBroker();
  // The store's reads wait until let go: how many run at once can be seen.
  const store = broker.presence;
  const count = store.count.bind(store);
  let running = 0;
  let most = 0;
  const perTopic = new Map<string, number>();
  let mostPerTopic = 0;
  const gates: (() => void)[] = [];
  store.count = async (topic: string) => {
    running++;
    most = Math.max(most, running);
    perTopic.set(topic, (perTopic.get(topic) ?? 0) + 1);
    mostPerTopic = Math.max(mostPerTopic, perTopic.get(topic)!);
    await new Promise<void>((resolve) => gates.push(resolve));
    running--;
    perTopic.set(topic, perTopic.get(topic)! - 1);
    return count(topic);
  };
  const { gateway, url } = await res.gateway({ broker });
  gateway.topic('room.*', { presence: true });
  const client = await RawRpc.open(url);
  res.track(client.socket);

  const ids: string[] = [];
  for (let round = 0; round < 5; round++) {
    const replies = await Promise.all(
      Array.from({ length: 12 }, (_, t) =>
        client.request('subscribe', ['$presence', { topic: `room.${t}` }]),
      ),
    );
    for (const reply of replies) ids.push(reply.result as string);
  }
  expect(ids.every((id) => typeof id === 'string')).toBe(true);
  // Let the reads go, a few at a time, until every subscription has its first page.
  await client.until(() => {
    for (const gate of gates.splice(0, 3)) gate();
    return ids.every((id) => client.notifications(id).length > 0);
  }, 'a first page for every subscription');
  expect(most).toBeLessThanOrEqual(MAX_PRESENCE_FIRST_PAGE_READS);
  expect(mostPerTopic).toBe(1);
  for (const id of ids) {
    expect(client.notifications(id)[0]?.result).toEqual({ count: 0, members: [] });
  }
});

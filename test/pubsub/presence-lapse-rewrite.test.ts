/**
 * A node whose presence lease lapsed (a long pause, a broker outage) writes its members again
 * under a new owner; when a write of that rewrite fails (the outage is often still on), the
 * rewrite is tried again at the next tick until every topic's members are back in the store:
 * else those members would be missing from every node's count and pages until each left. A
 * lease is renewed only once a write under its owner has settled: renewed while the owner's
 * first write is still on its way, it would be found missing and taken for a lapse, and every
 * member written again under new ids for nothing.
 */
import { afterEach, expect, it } from 'vitest';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { sleep } from '../support/promises.js';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { waitFor } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

it("a rewrite after a lapse whose write fails is tried again: every topic's members come back", async () => {
  const broker = new MemoryBroker();
  const store = broker.presence!;
  const { gateway, url } = await res.gateway({ broker, presenceLeaseMs: 300 });
  gateway.topic('room.*', { presence: true });
  for (const topic of ['room.1', 'room.2']) {
    const member = await RawRpc.open(url);
    res.track(member.socket);
    await member.request('subscribe', [topic]);
  }
  await waitFor(async () => (await gateway.presence('room.2').count()) === 1, 'both written');
  // The next renewal finds the lease lapsed, and the rewrite's first write of room.2 fails.
  const renew = store.renew.bind(store);
  let lapse = true;
  store.renew = (owner, leaseMs) => {
    if (!lapse) return renew(owner, leaseMs);
    lapse = false;
    return Promise.resolve(false);
  };
  const write = store.write.bind(store);
  let failWrite = true;
  let rewrites = 0;
  store.write = (topic, owner, joined, left, leaseMs) => {
    if (topic === 'room.2' && joined.length > 0 && !lapse) {
      rewrites++;
      if (failWrite) {
        failWrite = false;
        return Promise.reject(new Error('broker unavailable'));
      }
    }
    return write(topic, owner, joined, left, leaseMs);
  };
  await waitFor(() => rewrites >= 2, 'the failed write tried again');
  expect(await gateway.presence('room.1').count()).toBe(1);
  await waitFor(async () => (await gateway.presence('room.2').count()) === 1, 'room.2 back');
});

it("a renewal never races the owner's first write: a slow first write is no lapse", async () => {
  const broker = new MemoryBroker();
  const store = broker.presence!;
  // The first write takes several lease ticks to land; until it does the owner has no lease,
  // and a renewal then would say it lapsed.
  const write = store.write.bind(store);
  const owners: string[] = [];
  let landed = false;
  store.write = async (topic, owner, joined, left, leaseMs) => {
    owners.push(owner);
    if (owners.length === 1) await sleep(700);
    await write(topic, owner, joined, left, leaseMs);
    landed = true;
  };
  const { gateway, url } = await res.gateway({ broker, presenceLeaseMs: 300 });
  gateway.topic('room.*', { presence: true });
  const member = await RawRpc.open(url);
  res.track(member.socket);
  await member.request('subscribe', ['room.1']);
  await waitFor(() => landed, 'the first write landed');
  // Some ticks after it: each renews the lease the write made.
  await sleep(300);
  expect(await gateway.presence('room.1').count()).toBe(1);
  expect(new Set(owners).size).toBe(1);
});

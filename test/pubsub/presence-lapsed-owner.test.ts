/**
 * A presence owner (a node's name for its members) that lapsed or was released never gets a
 * lease again: a late write under a released owner is refused (its members would be listed
 * twice, then reaped as leaving), and on Redis so is one under an owner another node reaped
 * (the write would give it its lease back, and the node would never learn its members went).
 * Reaping or releasing an owner removes only the members it still holds: a key written since by
 * the node's next owner stays. On Redis a write whose lease lapses, and is reaped, while the node
 * pauses between the lease and the write (two scripts) writes nothing: a member written then
 * would be in no list a release or a reaper walks. On the real brokers, each store as the
 * gateway uses it. And a gateway whose first write made its lease though its reply was lost
 * renews it: reaped during an outage, it finds the lapse and writes its members anew.
 */
import { nanoid } from 'nanoid';
import { afterEach, describe, expect, it } from 'vitest';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RETIRED_OWNERS_KEPT } from '../../src/pubsub/presence.js';
import type { PresenceEntry, PresenceStore } from '../../src/pubsub/presence.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { RedisPresenceStore } from '../../src/pubsub/presence-redis.js';
import type { RedisScriptRunner } from '../../src/pubsub/redis-script-runner.js';
import { NATS_URL, REDIS_URL, deleteNatsStreams, deleteRedisKeys } from '../support/brokers.js';
import { startGateway } from '../support/gateway.js';
import { sleep } from '../support/promises.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitFor } from '../support/waiting.js';

const LEASE_MS = 300;
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const member = (key: string): PresenceEntry => ({ key, sessionId: key.split('/')[0]! });

/** Two nodes' presence stores on one broker, under a prefix of the test's own. */
async function twoStores(kind: 'redis' | 'nats'): Promise<readonly [PresenceStore, PresenceStore]> {
  const prefix = `lapse-${nanoid(6)}`;
  cleanups.push(async () => {
    if (kind === 'redis') return deleteRedisKeys(REDIS_URL, prefix);
    // The topic streams and the presence bucket's.
    await deleteNatsStreams(prefix);
  });
  const open = async (): Promise<PresenceStore> => {
    const broker =
      kind === 'redis'
        ? await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` })
        : await NatsBroker.connect({ servers: NATS_URL, prefix });
    cleanups.push(() => broker.close().catch(() => undefined));
    brokerOf.set(broker.presence!, broker);
    return broker.presence!;
  };
  return [await open(), await open()];
}

/** The broker each store of `twoStores` belongs to. */
const brokerOf = new WeakMap<PresenceStore, RedisBroker | NatsBroker>();

describe.each(['redis', 'nats'] as const)('%s', (kind) => {
  it('a write under an owner another node reaped is refused, and its renewal says it lapsed', async () => {
    const [a, b] = await twoStores(kind);
    await a.write('room.1', 'O1', [member('stay/0x1')], [], LEASE_MS);
    await sleep(LEASE_MS + 100); // no renewal: the lease lapses
    const reaped = await b.reap();
    expect(reaped.flatMap((r) => r.members.map((m) => m.key))).toEqual(['stay/0x1']);
    // A write that was queued on the node before it noticed: Redis refuses it (a write there
    // would give the owner its lease back); NATS takes it under the reaped owner, whose release
    // (what the node does once its renewal fails) takes it away.
    const late = await a.write('room.1', 'O1', [member('late/0x2')], [], LEASE_MS).then(
      () => 'written',
      () => 'refused',
    );
    expect(late).toBe(kind === 'redis' ? 'refused' : 'written');
    expect(await a.renew('O1', LEASE_MS)).toBe(false);
    await a.release('O1');
    expect(await a.count('room.1')).toBe(0);
  });

  it('a write under a released owner is refused; the next owner holds its members, none reaped from it', async () => {
    const [a, b] = await twoStores(kind);
    await a.write('room.1', 'O1', [member('stay/0x1')], [], LEASE_MS);
    await a.release('O1');
    await expect(a.write('room.1', 'O1', [member('late/0x2')], [], LEASE_MS)).rejects.toThrow(
      /lapsed/,
    );
    await a.write('room.1', 'O2', [member('stay/0x1'), member('late/0x2')], [], LEASE_MS);
    for (let i = 0; i < 4; i++) {
      expect(await a.renew('O2', LEASE_MS)).toBe(true);
      expect(await b.reap()).toEqual([]);
      await sleep(LEASE_MS / 3);
    }
    const page = await a.members('room.1', undefined, 10);
    expect(page.members.map((m) => m.key).sort()).toEqual(['late/0x2', 'stay/0x1']);
  });

  it('remembers the latest RETIRED_OWNERS_KEPT owners it released, not one per lapse for ever', async () => {
    const [a] = await twoStores(kind);
    const owners = Array.from({ length: RETIRED_OWNERS_KEPT + 20 }, (_, i) => `R${i}`);
    for (const owner of owners) {
      await a.write('room.1', owner, [member(`${owner}/0x1`)], [], LEASE_MS);
      await a.release(owner);
    }
    // What the store keeps of them: on Redis the owners it leased, on NATS those it retired.
    const kept = (a as unknown as { leasing: Set<string>; retired: Set<string> })[
      kind === 'redis' ? 'leasing' : 'retired'
    ];
    expect([...kept]).toEqual(owners.slice(-RETIRED_OWNERS_KEPT));
    for (const owner of [owners.at(-1)!, owners.at(-RETIRED_OWNERS_KEPT)!]) {
      await expect(a.write('room.1', owner, [member('late/0x2')], [], LEASE_MS)).rejects.toThrow(
        /lapsed/,
      );
    }
    expect(await a.count('room.1')).toBe(0);
  });
});

describe.each(['redis', 'nats'] as const)('%s, a gateway', (kind) => {
  it('whose first write lands with its reply lost renews the lease it made; reaped, it writes its members anew', async () => {
    const [a, b] = await twoStores(kind);
    // The first write lands and is reported failed; then the broker is out for this node
    // (writes and renewals fail) until the other node has reaped the lease that write made.
    const write = a.write.bind(a);
    const renew = a.renew.bind(a);
    let writes = 0;
    let down = false;
    a.write = async (topic, owner, joined, left, leaseMs) => {
      if (down) throw new Error('broker unavailable');
      await write(topic, owner, joined, left, leaseMs);
      if (++writes === 1) {
        down = true;
        throw new Error('the reply was lost');
      }
    };
    a.renew = (owner, leaseMs) =>
      down ? Promise.reject(new Error('broker unavailable')) : renew(owner, leaseMs);
    const broker = brokerOf.get(a)!;
    const { gateway, url } = await startGateway({ broker, presenceLeaseMs: LEASE_MS });
    cleanups.push(() => gateway.close());
    gateway.topic('room.*', { presence: true });
    const raw = await RawRpc.open(url);
    cleanups.push(() => raw.close());
    await raw.request('subscribe', ['room.1']);
    await waitFor(() => down, 'the first write made');
    await waitFor(async () => (await b.reap()).length > 0, 'the other node reaped it');
    down = false;
    await waitFor(async () => (await b.count('room.1')) === 1, 'its member written anew');
  });
});

describe('redis', () => {
  it('a write whose lease lapses and is reaped while the node pauses before writing writes nothing', async () => {
    const prefix = `lapse-${nanoid(6)}`;
    cleanups.push(() => deleteRedisKeys(REDIS_URL, prefix));
    const open = async (): Promise<RedisBroker> => {
      const broker = await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` });
      cleanups.push(() => broker.close().catch(() => undefined));
      return broker;
    };
    const [brokerA, brokerB] = [await open(), await open()];
    const b = brokerB.presence;
    // Node A's store, on its broker's own scripts, with a pause after a lease is taken: as long
    // as it takes the lease to lapse and node B to reap the owner.
    const runner = (brokerA as unknown as { runner: RedisScriptRunner }).runner;
    let pauses = 1;
    const pausing = {
      run: async (...call: Parameters<RedisScriptRunner['run']>) => {
        const answer = await runner.run(...call);
        const keys = call[1];
        if (keys.length === 3 && keys[0]!.endsWith('{presence}:leases') && pauses-- > 0) {
          await sleep(LEASE_MS + 100);
          expect(await b.reap()).toEqual([]); // the owner's topic listed, no member in it yet
        }
        return answer;
      },
    } as RedisScriptRunner;
    const a = new RedisPresenceStore(pausing, `${prefix}:`);
    await expect(a.write('room.1', 'O1', [member('ghost/1')], [], LEASE_MS)).rejects.toThrow(
      /lapsed/,
    );
    expect(await a.renew('O1', LEASE_MS)).toBe(false);
    await a.release('O1');
    expect(await a.count('room.1')).toBe(0);
    expect(await b.count('room.1')).toBe(0);
  });
});

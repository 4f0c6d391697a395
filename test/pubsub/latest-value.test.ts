import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import type { History } from '../../src/pubsub/broker.js';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

async function open(url: string): Promise<RawRpc> {
  const raw = await RawRpc.open(url);
  res.track(raw.socket);
  return raw;
}

/** The seq and data of every message notification of `id`. */
function received(raw: RawRpc, id: string): { seq: number; data: unknown }[] {
  return raw
    .notifications(id)
    .filter((n) => n.seq !== undefined && 'result' in n)
    .map((n) => ({ seq: n.seq!, data: n.result }));
}

/** Let other work run: a microtask, a macrotask, or a short timer. */
function pause(kind: number): Promise<void> {
  if (kind === 0) return Promise.resolve();
  if (kind === 1) return new Promise((resolve) => setImmediate(resolve));
  return new Promise((resolve) => setTimeout(resolve, kind - 1));
}

/**
 * A memory broker whose history reads take a while, before and after the moment they read: so
 * publishes land while a subscriber's latest value is being read, as on a networked broker.
 */
class SlowHistoryBroker extends MemoryBroker {
  delays: [number, number] = [0, 0];

  override async history(topic: string, afterSeq: number, limit?: number): Promise<History> {
    const [before, after] = this.delays;
    await pause(before);
    const history = await super.history(topic, afterSeq, limit);
    await pause(after);
    return history;
  }
}

describe('latest-value topics', () => {
  it('give a new subscriber the last message first, then the live ones', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('price.*', { latestValue: true });
    gateway.topic('plain');
    await gateway.publish('price.btc', { p: 1 });
    await gateway.publish('price.btc', { p: 2 });
    await gateway.publish('plain', 'before');

    const raw = await open(url);
    const id = (await raw.request('subscribe', ['price.btc'])).result as string;
    await raw.until(() => received(raw, id).length >= 1, 'the latest value');
    await gateway.publish('price.btc', { p: 3 });
    await raw.until(() => received(raw, id).length >= 2, 'the live message');
    await raw.barrier();
    expect(received(raw, id)).toEqual([
      { seq: 2, data: { p: 2 } },
      { seq: 3, data: { p: 3 } },
    ]);

    // A topic without latestValue, and one nobody published to: live messages only.
    const plainId = (await raw.request('subscribe', ['plain'])).result as string;
    const emptyId = (await raw.request('subscribe', ['price.eth'])).result as string;
    await gateway.publish('plain', 'after');
    await gateway.publish('price.eth', 'first');
    await raw.until(() => received(raw, emptyId).length >= 1, 'the first eth price');
    await raw.barrier();
    expect(received(raw, plainId)).toEqual([{ seq: 2, data: 'after' }]);
    expect(received(raw, emptyId)).toEqual([{ seq: 1, data: 'first' }]);
  });

  it('refuses a latestValue that is not a boolean, naming the topic and the option', async () => {
    const { gateway } = await res.gateway();
    expect(() => gateway.topic('bad', { latestValue: 'yes' as unknown as boolean })).toThrow(
      'topic "bad": latestValue must be true or false',
    );
    // Nothing was declared: the name is still free.
    expect(() => gateway.topic('bad', { latestValue: false })).not.toThrow();
  });

  it('tells a subscriber that asked for its position the seq before the latest value, then sends it; one with since resumes as it asked', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('score', { latestValue: true });
    await gateway.publish('score', 1);
    await gateway.publish('score', 2);
    const raw = await open(url);
    const positioned = (await raw.request('subscribe', ['score', null, { position: true }]))
      .result as string;
    const resumed = (await raw.request('subscribe', ['score', null, { since: 0 }]))
      .result as string;
    await raw.until(() => received(raw, resumed).length >= 2, 'the replay');
    await gateway.publish('score', 3);
    await raw.until(() => received(raw, positioned).length >= 1, 'the live message');
    await raw.barrier();
    const position = raw.notifications(positioned).find((n) => !('result' in n));
    expect(position?.seq).toBe(1);
    expect(received(raw, positioned).map((m) => m.seq)).toEqual([2, 3]);
    expect(received(raw, resumed).map((m) => m.seq)).toEqual([1, 2, 3]);
    // A latest-value topic nobody published to: position 0, then the live messages.
    gateway.topic('fresh', { latestValue: true });
    const fresh = (await raw.request('subscribe', ['fresh', null, { position: true }]))
      .result as string;
    await gateway.publish('fresh', 'first');
    await raw.until(() => received(raw, fresh).length >= 1, 'the first message');
    expect(raw.notifications(fresh).find((n) => !('result' in n))?.seq).toBe(0);
    expect(received(raw, fresh)).toEqual([{ seq: 1, data: 'first' }]);
  });

  it('starts after a last message its retention dropped, telling no gap and no missed', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('quiet', { latestValue: true, history: { maxAgeMs: 20 } });
    await gateway.publish('quiet', 1);
    await gateway.publish('quiet', 2);
    await waitUntil(
      async () => (await gateway.pubsub.broker.history('quiet', 0)).messages.length === 0,
      'the messages to age out',
    );
    const raw = await open(url);
    const positioned = (await raw.request('subscribe', ['quiet', null, { position: true }]))
      .result as string;
    const plain = (await raw.request('subscribe', ['quiet'])).result as string;
    await gateway.publish('quiet', 3);
    await raw.until(() => received(raw, plain).length >= 1, 'the live message');
    await raw.until(() => received(raw, positioned).length >= 1, 'the live message');
    await raw.barrier();
    const frames = (id: string) =>
      raw.notifications(id).map(({ subscription: _, epoch: __, ...rest }) => rest);
    expect(frames(positioned)).toEqual([{ seq: 2 }, { seq: 3, result: 3 }]);
    expect(frames(plain)).toEqual([{ seq: 3, result: 3 }]);
  });

  it("reaches the project's client, which asks every subscription's position", async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('quote.*', { latestValue: true });
    await gateway.publish('quote.eur', 1.08);
    await gateway.publish('quote.eur', 1.09);
    const client = res.client(url);
    const seen: unknown[] = [];
    client.subscribe<number>('quote.eur').subscribe((value) => seen.push(value));
    await waitUntil(() => seen.length >= 1, 'the latest value');
    await gateway.publish('quote.eur', 1.1);
    await waitUntil(() => seen.length >= 2, 'the live message');
    expect(seen).toEqual([1.09, 1.1]);
  });

  it('neither doubles nor loses a message published while the latest value is read', async () => {
    const broker = new SlowHistoryBroker();
    const { gateway, url } = await res.gateway({ broker });
    gateway.topic('race.*', { latestValue: true, history: { maxLength: 3 } });
    const raw = await open(url);
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: 6 }),
        fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 25 }),
        fc.tuple(fc.integer({ min: 0, max: 4 }), fc.integer({ min: 0, max: 4 })),
        async (before, pauses, delays) => {
          broker.delays = delays;
          const topic = `race.${run++}`;
          for (let n = 1; n <= before; n++) await gateway.publish(topic, n);
          const reply = raw.request('subscribe', [topic]);
          // The storm: publishes interleaved with the subscribe and its history read.
          let published = before;
          for (const kind of pauses) {
            await pause(kind);
            await gateway.publish(topic, ++published);
          }
          const answer = await reply;
          expect(answer.error).toBeUndefined();
          const id = answer.result as string;
          const last = published;
          if (last > 0) {
            await raw.until(() => received(raw, id).at(-1)?.seq === last, `seq ${last}`);
          }
          await raw.barrier();
          const seqs = received(raw, id).map((m) => m.seq);
          // The data is the seq here: each message is the one its seq names.
          for (const m of received(raw, id)) expect(m.data).toBe(m.seq);
          if (last === 0) {
            expect(seqs).toEqual([]);
            await raw.request('unsubscribe', [id]);
            return;
          }
          // It starts at the latest value when it subscribed (at least what was published
          // before the subscribe), then every later seq once, in order, to the last one.
          const first = seqs[0]!;
          expect(first).toBeGreaterThanOrEqual(Math.max(1, before));
          expect(seqs).toEqual(Array.from({ length: last - first + 1 }, (_, i) => first + i));
          await raw.request('unsubscribe', [id]);
        },
      ),
      { numRuns: 40 },
    );
  }, 60_000);
});

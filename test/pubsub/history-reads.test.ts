/**
 * The parts that bound resume replays (issue 14, finding 5), on their own: the node's history
 * reads (at most so many at once, identical ones shared, never with a reader that started
 * after the read was sent), slots that can be given up while waiting, and the encoding of
 * NATS stream names, which must give every (prefix, topic) pair a stream of its own.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Broker, BrokerMessage, History } from '../../src/pubsub/broker.js';
import { HistoryReads } from '../../src/pubsub/history-reads.js';
import { natsTopicNames } from '../../src/pubsub/nats-names.js';
import { Slots } from '../../src/pubsub/slots.js';
import { MAX_PAGE, nextPageSize } from '../../src/server/pubsub-resume.js';

/** A broker whose history reads the test answers one by one. */
class PendingBroker implements Broker {
  readonly ready = true;
  readonly reads: { afterSeq: number; limit?: number; answer: (history: History) => void }[] = [];

  publish(): Promise<number> {
    return Promise.reject(new Error('not used'));
  }

  subscribe(_topic: string, _deliver: (message: BrokerMessage) => void): Promise<void> {
    return Promise.resolve();
  }

  unsubscribe(): Promise<void> {
    return Promise.resolve();
  }

  history(_topic: string, afterSeq: number, limit?: number): Promise<History> {
    return new Promise((answer) => this.reads.push({ afterSeq, limit, answer }));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
const answer = (lastSeq: number): History => ({ messages: [], lastSeq, epoch: 'e' });

describe('Slots', () => {
  it('grants at most `size` at once, in arrival order, and skips turns given up', () => {
    const slots = new Slots(2);
    const granted: string[] = [];
    const releases = new Map<string, () => void>();
    const take = (name: string) =>
      slots.take((release) => {
        granted.push(name);
        releases.set(name, release);
      });
    take('a');
    take('b');
    const giveUpC = take('c');
    take('d');
    expect(granted).toEqual(['a', 'b']);
    expect(slots.waiting).toBe(2);
    giveUpC();
    releases.get('a')!();
    releases.get('a')!(); // twice: harmless
    expect(granted).toEqual(['a', 'b', 'd']);
    expect(slots.inUse).toBe(2);
    releases.get('b')!();
    releases.get('d')!();
    expect(slots.inUse).toBe(0);
  });
});

describe('HistoryReads', () => {
  it('sends at most maxConcurrent reads at once; the others wait their turn', async () => {
    const broker = new PendingBroker();
    const reads = new HistoryReads(broker, 2);
    const results: number[] = [];
    for (let i = 0; i < 5; i++) {
      reads.read('t', i * 10, 10, reads.mark(), (_error, history) =>
        results.push(history!.lastSeq),
      );
    }
    expect(broker.reads).toHaveLength(2);
    expect(reads.stats).toEqual({ reading: 2, waiting: 3 });
    broker.reads[0]!.answer(answer(1));
    await settle();
    expect(broker.reads).toHaveLength(3);
    for (const read of broker.reads.slice(1)) read.answer(answer(2));
    await settle();
    for (const read of broker.reads.slice(3)) read.answer(answer(3));
    await settle();
    expect(results.sort()).toEqual([1, 2, 2, 3, 3]);
    expect(reads.stats).toEqual({ reading: 0, waiting: 0 });
  });

  it('shares a read among readers that started before it was sent, not with later ones', async () => {
    const broker = new PendingBroker();
    const reads = new HistoryReads(broker, 1);
    const got: string[] = [];
    const reader = (name: string) => (_error: unknown, history?: History) =>
      got.push(`${name}:${history!.lastSeq}`);
    reads.read('busy', 0, 5, reads.mark(), reader('first')); // takes the one slot
    const early = reads.mark();
    reads.read('t', 0, 100, early, reader('a'));
    reads.read('t', 0, 100, early, reader('b'));
    reads.read('t', 0, 100, reads.mark(), reader('c')); // not sent yet: shared
    expect(broker.reads).toHaveLength(1);
    broker.reads[0]!.answer(answer(9));
    await settle();
    expect(broker.reads).toHaveLength(2); // one read for a, b and c
    const lateMark = reads.mark(); // after that read was sent
    reads.read('t', 0, 100, lateMark, reader('late')); // a read of its own
    broker.reads[1]!.answer(answer(10));
    await settle();
    expect(broker.reads).toHaveLength(3);
    broker.reads[2]!.answer(answer(11));
    await settle();
    expect(got).toEqual(['first:9', 'a:10', 'b:10', 'c:10', 'late:11']);
  });

  it('a read nobody waits for any more is never sent', async () => {
    const broker = new PendingBroker();
    const reads = new HistoryReads(broker, 1);
    reads.read('busy', 0, 5, reads.mark(), () => undefined);
    const leaveA = reads.read('t', 0, 100, reads.mark(), () => undefined);
    const leaveB = reads.read('t', 0, 100, reads.mark(), () => undefined);
    leaveA();
    leaveB();
    broker.reads[0]!.answer(answer(1));
    await settle();
    expect(broker.reads).toHaveLength(1);
    expect(reads.stats).toEqual({ reading: 0, waiting: 0 });
  });

  it('a failed read fails every reader that waited for it', async () => {
    const broker = new PendingBroker();
    broker.history = () => Promise.reject(new Error('Redis broker unavailable'));
    const reads = new HistoryReads(broker, 1);
    const errors: unknown[] = [];
    reads.read('t', 0, 10, reads.mark(), (error) => errors.push(error));
    reads.read('t', 0, 10, reads.mark(), (error) => errors.push(error));
    await settle();
    expect(errors).toHaveLength(2);
    expect(errors.every((e) => e instanceof Error && /unavailable/.test(e.message))).toBe(true);
  });
});

describe('page sizes', () => {
  it('are about the high-water mark, from 1 to MAX_PAGE, the same for the same inputs', () => {
    expect(nextPageSize(100, 200_000, 1024 * 1024)).toBe(524);
    expect(nextPageSize(100, 100 * 1_000_000, 1024 * 1024)).toBe(1);
    expect(nextPageSize(100, 100, 1024 * 1024)).toBe(MAX_PAGE);
    expect(nextPageSize(0, 0, 1024)).toBe(MAX_PAGE);
  });
});

describe('NATS stream names', () => {
  const prefix = fc.stringMatching(/^[a-z0-9_-]{1,8}$/);
  const topic = fc.oneof(
    fc.string({ maxLength: 8 }),
    fc.stringMatching(/^[0-9A-F_.b-]{0,8}$/),
    fc.constantFrom('b.x', '2Ex', '', '_', 'AB', '2E', '.'),
  );

  it('differ for any two (prefix, topic) pairs, a "_" in the prefix included', () => {
    expect(natsTopicNames('a', 'b.x').stream).not.toBe(natsTopicNames('a_b', '2Ex').stream);
    fc.assert(
      fc.property(prefix, topic, prefix, topic, (p1, t1, p2, t2) => {
        fc.pre(p1 !== p2 || t1 !== t2);
        expect(natsTopicNames(p1, t1).stream).not.toBe(natsTopicNames(p2, t2).stream);
        expect(natsTopicNames(p1, t1).subject).not.toBe(natsTopicNames(p2, t2).subject);
      }),
      { numRuns: 20_000 },
    );
  });

  it('are unchanged under a prefix without "_"', () => {
    expect(natsTopicNames('wsrpc', 'prices.BTC').stream).toBe('wsrpc_prices_2EBTC');
    expect(natsTopicNames('wsrpc', 'AB').stream).toBe('wsrpc_AB');
    expect(natsTopicNames('wsrpc_x', 'AB').stream).toBe('wsrpc_x__41B');
    expect(natsTopicNames('wsrpc_x', 'feed').stream).toBe('wsrpc_x_feed');
  });
});

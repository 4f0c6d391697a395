/*
 * A topic with more local subscribers than FAN_OUT_PER_TURN is fanned out that many per
 * event-loop turn (src/pubsub/topic-registry.ts), the sockets' I/O served in between. What it
 * must keep: every subscriber gets every message in the broker's order, once, with its epoch
 * notice before it and `except` honoured; nothing after it leaves; and what waits is bounded
 * (past MAX_FAN_OUT_BACKLOG the fan-out finishes in the turn). The broker is a stand-in that
 * hands the registry whatever messages the test makes (restarted numberings included); the
 * subscribers record what the registry asks of them.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { BrokerMessage } from '../../src/pubsub/broker.js';
import type { Delivery } from '../../src/pubsub/delivery.js';
import {
  FAN_OUT_PER_TURN,
  MAX_FAN_OUT_BACKLOG,
  TopicRegistry,
} from '../../src/pubsub/topic-registry.js';

const TOPIC = 'big';

/** What a subscriber was asked, in order: a message offered or passed by, an epoch notice. */
type Call = ['offer' | 'pass', number] | ['notice', string | undefined, boolean];

class Subscriber {
  readonly calls: Call[] = [];
  /** Calls made since the last `take` (for counting per turn). */
  fresh = 0;
  constructor(readonly ownerId: string) {}
  offer(_tail: string, _shared: unknown, seq: number): void {
    this.calls.push(['offer', seq]);
    this.fresh++;
  }
  pass(seq: number): void {
    this.calls.push(['pass', seq]);
    this.fresh++;
  }
  epochSeen(epoch: string | undefined, restarted: boolean): void {
    this.calls.push(['notice', epoch, restarted]);
  }
}

async function registryWith(perTurn?: number, maxBacklog?: number) {
  let deliver: ((message: BrokerMessage) => void) | undefined;
  const broker = {
    subscribe: (_topic: string, d: (message: BrokerMessage) => void) => {
      deliver = d;
      return Promise.resolve();
    },
    unsubscribe: () => Promise.resolve(),
  };
  let ids = 0;
  const registry = new TopicRegistry(
    broker,
    'head',
    () => `id${++ids}`,
    () => undefined,
    perTurn,
    maxBacklog,
  );
  await registry.hold(TOPIC);
  const add = (ownerId: string): Subscriber => {
    const subscriber = new Subscriber(ownerId);
    registry.attach(TOPIC, subscriber as unknown as Delivery);
    return subscriber;
  };
  const remove = (subscriber: Subscriber) =>
    registry.detach(TOPIC, subscriber as unknown as Delivery);
  const publish = (message: Omit<BrokerMessage, 'topic' | 'payload'>) =>
    deliver!({ topic: TOPIC, payload: '1', ...message });
  return { registry, add, remove, publish };
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
/** Subscribers written to since the last call. */
const written = (subscribers: Subscriber[]) =>
  subscribers.reduce((n, s) => {
    const touched = s.fresh > 0 ? 1 : 0;
    s.fresh = 0;
    return n + touched;
  }, 0);

describe('fan-out in turns', () => {
  it(`a topic of ${2.5 * FAN_OUT_PER_TURN} subscribers: ${FAN_OUT_PER_TURN} per turn, another task's work between; one of ${FAN_OUT_PER_TURN} at once`, async () => {
    const big = await registryWith();
    const subscribers = Array.from({ length: 2.5 * FAN_OUT_PER_TURN }, (_, i) => big.add(`s${i}`));
    const between: number[] = [];
    big.publish({ seq: 1 });
    // Gathered until the end of the task that received it.
    expect(written(subscribers)).toBe(0);
    await Promise.resolve();
    const turns = [written(subscribers)];
    for (let i = 0; i < 3; i++) {
      // Queued after the fan-out's next turn: it runs between two of its turns.
      setImmediate(() => between.push(written(subscribers)));
      await nextTurn();
      turns.push(between.at(-1)!);
    }
    expect(turns).toEqual([FAN_OUT_PER_TURN, FAN_OUT_PER_TURN, FAN_OUT_PER_TURN / 2, 0]);
    expect(subscribers.every((s) => s.calls.length === 1)).toBe(true);

    const small = await registryWith();
    const few = Array.from({ length: FAN_OUT_PER_TURN }, (_, i) => small.add(`s${i}`));
    small.publish({ seq: 1 });
    expect(written(few)).toBe(FAN_OUT_PER_TURN);
  });

  it('the messages of one task reach each subscriber together, in order; later ones wait for the next batch', async () => {
    const { add, publish } = await registryWith(2);
    const subscribers = ['a', 'b', 'c', 'd', 'e'].map(add);
    publish({ seq: 1 });
    publish({ seq: 2 });
    await Promise.resolve();
    // The first turn: two subscribers, each given both messages.
    expect(subscribers.map((s) => s.calls.length)).toEqual([2, 2, 0, 0, 0]);
    publish({ seq: 3 });
    for (let i = 0; i < 5; i++) await nextTurn();
    for (const s of subscribers) {
      expect(s.calls).toEqual([
        ['offer', 1],
        ['offer', 2],
        ['offer', 3],
      ]);
    }
  });

  it(`what waits behind a fan-out in turns is bounded: past the bound (${MAX_FAN_OUT_BACKLOG}; 3 here) the fan-out finishes in the turn`, async () => {
    const { add, publish } = await registryWith(2, 3);
    const subscribers = ['a', 'b', 'c', 'd', 'e'].map(add);
    publish({ seq: 1 });
    await Promise.resolve();
    publish({ seq: 2 });
    publish({ seq: 3 });
    expect(subscribers.map((s) => s.calls.length)).toEqual([1, 1, 0, 0, 0]);
    publish({ seq: 4 });
    expect(subscribers.map((s) => s.calls.map((c) => c[1]))).toEqual(
      subscribers.map(() => [1, 2, 3, 4]),
    );
    // Nothing is left to run, and the next message starts afresh.
    publish({ seq: 5 });
    for (let i = 0; i < 4; i++) await nextTurn();
    expect(subscribers.every((s) => s.calls.at(-1)![1] === 5 && s.calls.length === 5)).toBe(true);
  });

  it('model: every subscriber gets every message from the broker from when it joined until it left, once, in order, with its notice and except honoured', async () => {
    /** Steps: a message (with an epoch change, a restart, an except), a join, a leave, a turn. */
    const step = fc.oneof(
      fc.record({
        kind: fc.constant('message' as const),
        epochChange: fc.boolean(),
        restart: fc.boolean(),
        except: fc.array(fc.nat(11), { maxLength: 3 }),
      }),
      fc.record({ kind: fc.constant('join' as const), owner: fc.nat(11) }),
      fc.record({ kind: fc.constant('leave' as const), which: fc.nat() }),
      fc.record({ kind: fc.constant('turn' as const), microtask: fc.boolean() }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 0, max: 8 }),
        fc.array(step, { maxLength: 60 }),
        async (perTurn, maxBacklog, initial, steps) => {
          const { add, remove, publish } = await registryWith(perTurn, maxBacklog);
          interface Member {
            subscriber: Subscriber;
            /** Messages sent by the broker before it joined, and before it left. */
            joinedAt: number;
            leftAt: number | undefined;
          }
          const members: Member[] = [];
          const sent: {
            seq: number;
            epoch: string;
            notice: Call | undefined;
            except: Set<string>;
          }[] = [];
          let seq = 0;
          let epoch = 'e0';
          const join = (owner: number) =>
            members.push({
              subscriber: add(`s${owner}`),
              joinedAt: sent.length,
              leftAt: undefined,
            });
          for (let i = 0; i < initial; i++) join(i);
          for (const s of steps) {
            if (s.kind === 'join') join(s.owner);
            else if (s.kind === 'leave') {
              const present = members.filter((m) => m.leftAt === undefined);
              const member = present[s.which % Math.max(1, present.length)];
              if (member) {
                remove(member.subscriber);
                member.leftAt = sent.length;
              }
            } else if (s.kind === 'turn') {
              await (s.microtask ? Promise.resolve() : nextTurn());
            } else {
              let notice: Call | undefined;
              if (s.restart && seq > 0) {
                seq = 0;
                epoch = `e${sent.length}`;
                notice = ['notice', epoch, true];
              } else if (s.epochChange || sent.length === 0) {
                const restarted = sent.length > 0;
                epoch = `e${sent.length}`;
                notice = ['notice', epoch, restarted];
              }
              seq++;
              const except = new Set(s.except.map((o) => `s${o}`));
              sent.push({ seq, epoch, notice, except });
              publish({ seq, epoch, except: except.size > 0 ? [...except] : undefined });
            }
          }
          // Let everything under way finish.
          for (let i = 0; i < 4 + (2 * sent.length * members.length) / perTurn; i++) {
            await nextTurn();
          }
          for (const { subscriber, joinedAt, leftAt } of members) {
            // What it was asked, message by message, in the order the broker sent them.
            const expected = (m: (typeof sent)[number]): Call[] => [
              ...(m.notice ? [m.notice] : []),
              [m.except.has(subscriber.ownerId) ? 'pass' : 'offer', m.seq],
            ];
            const got = subscriber.calls;
            const per = sent.map(expected);
            // A contiguous run of what was sent, in order, each message once: from one sent no
            // later than it joined (a batch under way reaches subscribers that join), up to the
            // last sent if it is still there, else to one sent before it left (a batch that had
            // not reached it leaves it out).
            let matched = false;
            for (let from = 0; from <= joinedAt && !matched; from++) {
              let at = 0;
              let to = from;
              while (to < sent.length && at < got.length) {
                const part = per[to]!;
                if (JSON.stringify(got.slice(at, at + part.length)) !== JSON.stringify(part)) break;
                at += part.length;
                to++;
              }
              if (at !== got.length) continue;
              matched = leftAt === undefined ? to === sent.length : to <= leftAt;
            }
            expect(
              matched,
              `${subscriber.ownerId} joined after ${joinedAt}, left after ${leftAt}: ${JSON.stringify(got)}`,
            ).toBe(true);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

/**
 * A connection's running total of what its subscriptions hold back during replays (HeldOutput),
 * against a model, under random holds and releases: replays begun, live messages held (past a
 * small highWaterMark, the topic's policy drops or keeps the newest, or disconnects), pages
 * written (the held messages they pass go first), replays ended, numberings restarted,
 * subscriptions ended and the connection closed. The model is what the backlogs hold: the
 * characters of the frames in each subscription's queue. After every step the total equals
 * their sum, is never negative, and is what the node's output budget counts for it; once the
 * connection has closed it is 0, and so is the budget.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { messageTail, notificationHead } from '../../src/pubsub/frames.js';
import type { SlowConsumerPolicy } from '../../src/pubsub/delivery.js';
import type { Sink } from '../../src/pubsub/sink.js';
import { CompactMap } from '../../src/server/compact-map.js';
import type { SessionTable } from '../../src/server/pubsub-types.js';
import { TopicSubscription } from '../../src/server/topic-subscription.js';
import type { TopicEnds, TopicRoute } from '../../src/server/topic-subscription.js';
import { OutputBudget } from '../../src/transport/output-budget.js';

const SUBSCRIPTIONS = 3;
const HWM = 100;

type Step =
  | { kind: 'pause'; at: number }
  | { kind: 'offer'; at: number; chars: number }
  | { kind: 'begin'; at: number }
  | { kind: 'page'; at: number; ahead: number }
  | { kind: 'end'; at: number }
  | { kind: 'restart'; at: number }
  | { kind: 'unsubscribe'; at: number }
  | { kind: 'close' };

const at = fc.nat(SUBSCRIPTIONS - 1);
const step: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: at.map((i) => ({ kind: 'pause' as const, at: i })), weight: 3 },
  {
    arbitrary: fc
      .record({ at, chars: fc.integer({ min: 1, max: 70 }) })
      .map((s) => ({ kind: 'offer' as const, ...s })),
    weight: 8,
  },
  { arbitrary: at.map((i) => ({ kind: 'begin' as const, at: i })), weight: 1 },
  {
    arbitrary: fc
      .record({ at, ahead: fc.integer({ min: 0, max: 5 }) })
      .map((s) => ({ kind: 'page' as const, ...s })),
    weight: 3,
  },
  { arbitrary: at.map((i) => ({ kind: 'end' as const, at: i })), weight: 1 },
  { arbitrary: at.map((i) => ({ kind: 'restart' as const, at: i })), weight: 1 },
  { arbitrary: at.map((i) => ({ kind: 'unsubscribe' as const, at: i })), weight: 1 },
  { arbitrary: fc.constant({ kind: 'close' as const }), weight: 1 },
);

/** The internals the model reads: the frames queued in a subscription's backlog. */
function queued(subscription: TopicSubscription<unknown>): number {
  const replay = (subscription as unknown as { replay?: { waiting?: Iterable<{ tail: string }> } })
    .replay;
  let chars = 0;
  for (const { tail } of replay?.waiting ?? []) chars += tail.length;
  return chars;
}

function connection(policy: SlowConsumerPolicy) {
  // Off (limit 0), it still keeps the running total its members report.
  const budget = new OutputBudget<never>(
    0,
    () => [],
    () => undefined,
    () => undefined,
  );
  let closed = false;
  const sink: Sink = {
    send: () => undefined,
    bufferedAmount: 0,
    close: () => void (closed = true),
    onDrain: () => () => undefined,
    id: 'session',
  };
  const table: SessionTable = {
    sink,
    subscriptions: new CompactMap(),
    topicBytes: 0,
    historySlots: undefined,
    drains: undefined,
    newTopics: undefined,
    held: undefined,
  };
  const ends: TopicEnds<unknown> = {
    registry: { detach: () => undefined, release: () => undefined },
    lifecycle: () => undefined,
    budget: () => budget,
  };
  const route: TopicRoute<unknown> = {
    head: notificationHead('subscription'),
    flow: { slowConsumer: policy, highWaterMark: HWM },
    onSlowConsumer: () => undefined,
    ends,
  };
  const subscriptions = Array.from({ length: SUBSCRIPTIONS }, (_, i) => {
    const subscription = new TopicSubscription<unknown>(`t${i}`, undefined, route, `"${i}"`, table);
    table.subscriptions.set(String(i), subscription);
    return { subscription, seq: 0, epochs: 0 };
  });
  return { budget, table, subscriptions, isClosed: () => closed };
}

it('the held total is the sum of the backlogs, never negative, and 0 once closed', () => {
  fc.assert(
    fc.property(
      fc.constantFrom<SlowConsumerPolicy>('drop', 'keep-latest', 'disconnect'),
      fc.array(step, { maxLength: 80 }),
      (policy, steps) => {
        const { budget, table, subscriptions, isClosed } = connection(policy);
        const total = () => table.held?.chars ?? 0;
        const check = () => {
          let sum = 0;
          for (const { subscription } of subscriptions) sum += queued(subscription);
          expect(total()).toBe(sum);
          expect(total()).toBeGreaterThanOrEqual(0);
          expect(budget.bytes).toBe(total());
        };
        let connectionClosed = false;
        const close = () => {
          // What the service does when the session closes (PubSubService.detach).
          for (const s of table.subscriptions.values()) s.teardown();
          table.subscriptions.clear();
          table.held?.leave();
          connectionClosed = true;
        };
        for (const s of steps) {
          if (connectionClosed) break;
          if (s.kind === 'close') {
            close();
            break;
          }
          const one = subscriptions[s.at]!;
          const sub = one.subscription;
          switch (s.kind) {
            case 'pause':
              sub.pauseForReplay(one.seq);
              break;
            case 'offer':
              sub.offer('x'.repeat(s.chars), undefined, ++one.seq);
              break;
            case 'begin':
              sub.replayBegin(0, undefined, `e${one.epochs}`, true);
              break;
            case 'page':
              // A history message after the held ones: those before it are written first.
              one.seq += s.ahead;
              sub.replayPage([{ tail: messageTail('1', one.seq), seq: one.seq }], `e${one.epochs}`);
              break;
            case 'end':
              sub.replayEnd();
              break;
            case 'restart':
              sub.epochSeen(`e${++one.epochs}`, true);
              break;
            case 'unsubscribe':
              if (table.subscriptions.get(String(s.at)) === sub) {
                table.subscriptions.delete(String(s.at));
                sub.teardown();
              }
              break;
          }
          check();
          // The disconnect policy closes the connection: the service then detaches it.
          if (isClosed()) close();
        }
        check();
        if (connectionClosed) {
          expect(total()).toBe(0);
          expect(budget.bytes).toBe(0);
        }
        close();
        expect(total()).toBe(0);
        expect(budget.bytes).toBe(0);
      },
    ),
    { numRuns: 500 },
  );
});

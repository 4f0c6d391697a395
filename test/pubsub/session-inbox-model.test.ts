/**
 * A model of one session's user messages under user inboxes (SessionInbox): whatever its calls
 * do (a first call of another kind, `$inbox` subscribes that start and are answered, fail
 * before they start or after, several at once, the hold running out), every message sent to the
 * user after the session opened reaches it exactly once, plain or through a `$inbox`
 * subscription that was answered, never both. What fails is the subscribe, never a message.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import type { Params } from '../../src/protocol/types.js';
import type { SubscribeRequest } from '../../src/pubsub/subscribe-params.js';
import { SessionInbox } from '../../src/server/session-router.js';

const HOLD_MS = 1_000;

type Op =
  | { kind: 'send' }
  | { kind: 'call' }
  | { kind: 'subscribe'; position: boolean }
  | { kind: 'start'; which: number }
  | { kind: 'answer'; which: number }
  | { kind: 'fail'; which: number }
  | { kind: 'wait' };

const op: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.constant({ kind: 'send' as const }), weight: 4 },
  fc.constant({ kind: 'call' as const }),
  fc.boolean().map((position) => ({ kind: 'subscribe' as const, position })),
  fc.nat(3).map((which) => ({ kind: 'start' as const, which })),
  fc.nat(3).map((which) => ({ kind: 'answer' as const, which })),
  fc.nat(3).map((which) => ({ kind: 'fail' as const, which })),
  fc.constant({ kind: 'wait' as const }),
);

/** A `$inbox` subscribe on its way: claimed, then maybe started (it delivers from `from`). */
interface Attempt {
  request: SubscribeRequest;
  /** Set once started: the last seq before the first it delivers. */
  from?: number;
}

/** What a subscription that was answered delivers: every message after `from`. */
interface Subscription {
  from: number;
  got: number[];
}

function run(ops: Op[]): void {
  const plain: number[] = [];
  const session = {
    notifyChecked: (_method: string, params: Params | undefined) =>
      void plain.push((params as number[])[0]!),
    isClosed: false,
    logger: silentLogger,
  };
  // More than any run sends: the bound on what is held is not what this model checks.
  const inbox = new SessionInbox(session, HOLD_MS, 1_000);
  const attempts: Attempt[] = [];
  const subscriptions: Subscription[] = [];
  let seq = 0;
  const pick = (which: number, started: boolean) =>
    attempts.filter((a) => (a.from !== undefined) === started)[which];
  const end = (attempt: Attempt) => attempts.splice(attempts.indexOf(attempt), 1);

  const apply = (step: Op) => {
    switch (step.kind) {
      case 'send': {
        seq++;
        // A started subscription has joined the topic: it takes every message from here, and
        // delivers them should it be answered.
        for (const s of subscriptions) s.got.push(seq);
        if (inbox.wantsMessages) {
          inbox.offer({ seq, epoch: 'e', method: 'msg', params: [seq] });
        }
        return;
      }
      case 'call':
        if (inbox.undecided) inbox.firstCall();
        return;
      case 'subscribe': {
        inbox.claim();
        const request: SubscribeRequest = { name: '$inbox', params: undefined };
        if (step.position) request.position = true;
        attempts.push({ request });
        return;
      }
      case 'start': {
        const attempt = pick(step.which, false);
        if (!attempt) return;
        const begun = inbox.started(attempt.request);
        attempt.from = begun.since ?? seq;
        return;
      }
      case 'answer': {
        const attempt = pick(step.which, true);
        if (!attempt) return;
        end(attempt);
        inbox.confirmed();
        const from = attempt.from!;
        subscriptions.push({ from, got: range(from + 1, seq) });
        return;
      }
      case 'fail': {
        const attempt = attempts[step.which];
        if (!attempt) return;
        end(attempt);
        inbox.failed();
        return;
      }
      case 'wait':
        vi.advanceTimersByTime(HOLD_MS);
        return;
    }
  };

  for (const step of ops) apply(step);
  // Every subscribe is answered in the end; the ones left fail, and the hold runs out.
  while (attempts.length > 0) apply({ kind: 'fail', which: 0 });
  apply({ kind: 'wait' });

  const delivered = [...plain, ...subscriptions.flatMap((s) => s.got)];
  // Subscriptions answered together may overlap each other (the client asked twice); plain
  // copies overlap nothing, and nothing sent is missing.
  expect(new Set(plain).size).toBe(plain.length);
  for (const s of subscriptions) expect(plain.filter((n) => n > s.from)).toEqual([]);
  expect(new Set(delivered)).toEqual(new Set(range(1, seq)));
  inbox.close();
}

function range(first: number, last: number): number[] {
  return Array.from({ length: Math.max(0, last - first + 1) }, (_, i) => first + i);
}

afterEach(() => {
  vi.useRealTimers();
});

describe('SessionInbox (model)', () => {
  it('every message reaches the session exactly once, plain or through an answered $inbox subscription', () => {
    vi.useFakeTimers();
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => run(ops)),
      { numRuns: 500 },
    );
  });

  it('examples: a subscribe without position, failing before and after it started', () => {
    vi.useFakeTimers();
    for (const ops of EXAMPLES) run(ops);
  });
});

/** Sequences that lost messages before the subscribe's failure gave them back. */
const EXAMPLES: Op[][] = [
  // Held, then a $inbox subscribe without `position`: it starts from the first held.
  [
    { kind: 'send' },
    { kind: 'subscribe', position: false },
    { kind: 'start', which: 0 },
    { kind: 'answer', which: 0 },
  ],
  // Refused before it started: what was held goes plain at the next call.
  [
    { kind: 'send' },
    { kind: 'subscribe', position: true },
    { kind: 'fail', which: 0 },
    { kind: 'call' },
    { kind: 'send' },
  ],
  // Failed after it started: held again, and a retry starts from the first.
  [
    { kind: 'send' },
    { kind: 'subscribe', position: true },
    { kind: 'start', which: 0 },
    { kind: 'send' },
    { kind: 'fail', which: 0 },
    { kind: 'send' },
    { kind: 'subscribe', position: true },
    { kind: 'start', which: 0 },
    { kind: 'answer', which: 0 },
  ],
  // A plain session's subscribe fails: what came meanwhile goes plain.
  [
    { kind: 'call' },
    { kind: 'send' },
    { kind: 'subscribe', position: true },
    { kind: 'send' },
    { kind: 'fail', which: 0 },
  ],
];

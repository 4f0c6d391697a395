/*
 * Model-based property test of subscriptionStatus$ over the client's subscription manager
 * (src/client/subscriptions.ts), driven in memory: a scripted caller stands for the connection
 * (subscribe calls that the test answers, refuses or loses with the connection), and random
 * runs of observers coming and going, replies, refusals, lost and regained connections, gap
 * signals, messages, holes in the sequence (filled by resubscribing), a status observer that
 * goes away and one that looks afresh (it never saw the entry accepted), and the client's close
 * are checked against a model of the states
 * (connecting, subscribed, resuming, gap, error, closed). After every step the last status told
 * is the model's; a state is never told twice in a row (a gap excepted: gap, then subscribed).
 */
import fc from 'fast-check';
import type { Subscription } from 'rxjs';
import { describe, expect, it } from 'vitest';
import type { RpcClient } from '../../src/client/client.js';
import { subscriptionStatus$ } from '../../src/client/subscription-status.js';
import type { SubscriptionStatus } from '../../src/client/subscription-status.js';
import { ClientSubscriptions, managers } from '../../src/client/subscriptions.js';
import type { SubscriptionCaller } from '../../src/client/subscriptions.js';
import { Hub } from '../../src/peer/hub.js';
import { silentLogger } from '../../src/peer/logger.js';
import { JsonRpcError } from '../../src/protocol/errors.js';
import { ConnectionClosedError, NotConnectedError } from '../../src/protocol/local-errors.js';
import { DEFAULT_SUBSCRIPTION_METHODS } from '../../src/protocol/subscription-frames.js';
import type { DisconnectEvent } from '../../src/client/authentication.js';

const TOPIC = 'feed';

type Op =
  | { kind: 'observe' }
  | { kind: 'leave' }
  | { kind: 'reply' }
  | { kind: 'refuse' }
  | { kind: 'drop' }
  | { kind: 'reopen' }
  | { kind: 'gap' }
  | { kind: 'message' }
  | { kind: 'hole' }
  | { kind: 'watch' }
  | { kind: 'close' };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: 'observe' } as const) },
  { weight: 3, arbitrary: fc.constant({ kind: 'leave' } as const) },
  { weight: 5, arbitrary: fc.constant({ kind: 'reply' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'refuse' } as const) },
  { weight: 2, arbitrary: fc.constant({ kind: 'drop' } as const) },
  { weight: 3, arbitrary: fc.constant({ kind: 'reopen' } as const) },
  { weight: 2, arbitrary: fc.constant({ kind: 'gap' } as const) },
  { weight: 2, arbitrary: fc.constant({ kind: 'message' } as const) },
  { weight: 2, arbitrary: fc.constant({ kind: 'hole' } as const) },
  { weight: 2, arbitrary: fc.constant({ kind: 'watch' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'close' } as const) },
);

/** A subscribe call: sent on an open connection, or waiting in the queue for the next one. */
interface Call {
  sent: boolean;
  accept: (id: string) => void;
  reject: (err: unknown) => void;
  /** The model's entry and attempt it belongs to. */
  entry: number;
  attempt: number;
}

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The manager over a scripted connection, with the client face subscriptionStatus$ reads. */
function harness() {
  const calls: Call[] = [];
  const state = { open: true, closed: false, ids: 0 };
  /** Set by the model before each subscribe the manager makes: whose call it is. */
  const next = { entry: 0, attempt: 0 };
  const caller: SubscriptionCaller = {
    call: () => Promise.resolve(true),
    subscribe: (_method, _params, onAccepted) =>
      state.closed
        ? Promise.reject(new NotConnectedError('Client closed'))
        : new Promise((resolve, reject) => {
            calls.push({
              sent: state.open,
              accept: (id) => {
                onAccepted(id);
                resolve(id);
              },
              reject,
              ...next,
            });
          }),
    retryDelay: () => 0,
    get isOpen() {
      return state.open && !state.closed;
    },
    get isClosed() {
      return state.closed;
    },
  };
  const manager = new ClientSubscriptions(caller, DEFAULT_SUBSCRIPTION_METHODS, silentLogger);
  const disconnects = new Hub<DisconnectEvent>();
  const client = { disconnects$: disconnects.observable } as unknown as RpcClient;
  managers.set(client, manager);
  return { calls, state, next, manager, disconnects, client };
}

/** What the model expects of the subscription. */
interface Model {
  observers: number;
  /** The entry's number while one is active (someone observes it). */
  entry: number | undefined;
  entries: number;
  attempt: number;
  subscribed: boolean;
  acceptedOnce: boolean;
  /** The server id of the current subscription, for its notifications. */
  id: string | undefined;
  /** Resubscribe on the next open: active when the connection was lost. */
  resubscribe: boolean;
  /** The last word was an error: kept until a new subscribe. */
  failed: boolean;
  seq: number;
  /** Holes the current entry filled by resubscribing (RESYNC_BUDGET a minute, then gaps). */
  resyncs: number;
  closed: boolean;
}

/** How many holes a minute the client fills by resubscribing (RESYNC_BUDGET). */
const RESYNC_BUDGET = 5;

/** A status observer, and what it was told. */
interface Watcher {
  told: SubscriptionStatus[];
  done: boolean;
  subscription: Subscription;
}

/** Only a gap repeats a state: gap, then subscribed again. */
function checkRepeats(told: SubscriptionStatus[]): void {
  for (let i = 1; i < told.length; i++) {
    if (told[i]!.state === told[i - 1]!.state) {
      expect(told[i - 1]!.state, 'only a gap repeats a state').toBe('subscribed');
      expect(told[i - 2]?.state).toBe('gap');
    }
  }
}

function expected(model: Model): SubscriptionStatus['state'] {
  if (model.entry === undefined) return model.failed ? 'error' : 'closed';
  if (model.subscribed) return 'subscribed';
  return model.acceptedOnce ? 'resuming' : 'connecting';
}

async function run(ops: Op[]): Promise<void> {
  const h = harness();
  const watch = (): Watcher => {
    const w: Watcher = { told: [], done: false, subscription: undefined as never };
    w.subscription = subscriptionStatus$(h.client, TOPIC).subscribe({
      next: (s) => w.told.push(s),
      complete: () => (w.done = true),
    });
    return w;
  };
  // The status observer: it may go away for a while ('watch'), and a new one look again.
  let watcher: Watcher | undefined = watch();
  const observers: Subscription[] = [];
  const model: Model = {
    observers: 0,
    entry: undefined,
    entries: 0,
    attempt: 0,
    subscribed: false,
    acceptedOnce: false,
    id: undefined,
    resubscribe: false,
    failed: false,
    seq: 0,
    resyncs: 0,
    closed: false,
  };
  /** A new attempt of the current entry: the manager is about to send a subscribe. */
  const attempt = (): void => {
    h.next.entry = model.entry!;
    h.next.attempt = ++model.attempt;
  };
  const current = (call: Call): boolean =>
    call.entry === model.entry && call.attempt === model.attempt;
  const failAll = (): void => {
    // The manager tells its Observers the error: each of their subscriptions is over.
    observers.splice(0);
    model.observers = 0;
    model.entry = undefined;
    model.subscribed = false;
    model.failed = true;
  };

  expect(watcher.told.map((s) => s.state)).toEqual(['closed']);
  for (const step of ops) {
    if (model.closed) break;
    const before = watcher?.told.length ?? 0;
    let gap: number | undefined;
    switch (step.kind) {
      case 'observe': {
        if (model.observers === 0) {
          model.entry = ++model.entries;
          model.attempt = 0;
          model.subscribed = false;
          model.acceptedOnce = false;
          model.failed = false;
          model.resubscribe = false;
          model.resyncs = 0;
          attempt();
        }
        model.observers++;
        observers.push(
          h.manager.observe(TOPIC).subscribe({ error: () => undefined, complete: () => undefined }),
        );
        break;
      }
      case 'leave': {
        const observer = observers.shift();
        if (!observer) break;
        observer.unsubscribe();
        if (--model.observers === 0) {
          model.entry = undefined;
          model.subscribed = false;
          model.failed = false;
        }
        break;
      }
      case 'reply': {
        const i = h.calls.findIndex((c) => c.sent);
        if (i < 0) break;
        const [call] = h.calls.splice(i, 1);
        const id = `0x${(++h.state.ids).toString(16)}`;
        call!.accept(id);
        if (current(call!) && model.entry !== undefined) {
          model.subscribed = true;
          model.acceptedOnce = true;
          model.id = id;
          // The position follows the reply, as the gateway sends it: the last seq seen.
          h.manager.handleNotification({ subscription: id, seq: model.seq }, 0);
        }
        break;
      }
      case 'refuse': {
        const i = h.calls.findIndex((c) => c.sent);
        if (i < 0) break;
        const [call] = h.calls.splice(i, 1);
        call!.reject(new JsonRpcError(-32004, 'Unauthorized'));
        if (current(call!) && model.entry !== undefined) failAll();
        break;
      }
      case 'drop': {
        if (!h.state.open) break;
        h.state.open = false;
        const lost = h.calls.filter((c) => c.sent);
        h.calls.splice(0, h.calls.length, ...h.calls.filter((c) => !c.sent));
        h.manager.connectionLost();
        for (const call of lost) {
          call.reject(new ConnectionClosedError());
          if (current(call) && model.entry !== undefined) model.resubscribe = true;
        }
        await settle();
        if (model.subscribed) {
          model.subscribed = false;
          model.resubscribe = true;
        }
        h.disconnects.next({ code: 1006, willRetry: true });
        break;
      }
      case 'reopen': {
        if (h.state.open) break;
        h.state.open = true;
        for (const call of h.calls) call.sent = true;
        if (model.resubscribe && model.entry !== undefined) attempt();
        model.resubscribe = false;
        h.manager.connectionOpened();
        break;
      }
      case 'gap':
      case 'message': {
        if (!model.subscribed) break;
        if (step.kind === 'gap') {
          gap = 3;
          model.seq += 3;
          h.manager.handleNotification({ subscription: model.id!, gap: 3 }, 0);
        } else {
          h.manager.handleNotification(
            { subscription: model.id!, result: model.seq + 1, seq: ++model.seq },
            0,
          );
        }
        break;
      }
      case 'hole': {
        // A message one past the next, with no word of the one between: the client fills the
        // hole by resubscribing from the last one seen (resuming), RESYNC_BUDGET times; past
        // that it tells the hole as a gap of one.
        if (!model.subscribed) break;
        const seq = model.seq + 2;
        if (model.resyncs < RESYNC_BUDGET) {
          model.resyncs++;
          model.subscribed = false;
          attempt();
        } else {
          gap = 1;
          model.seq = seq;
        }
        h.manager.handleNotification({ subscription: model.id!, result: seq, seq }, 0);
        break;
      }
      case 'watch': {
        if (watcher) {
          watcher.subscription.unsubscribe();
          checkRepeats(watcher.told);
          watcher = undefined;
        } else {
          // A status observer that never saw the entry accepted: it reads the state afresh (and
          // no entry is 'closed' to it, whatever error an earlier observer was told).
          watcher = watch();
          if (model.entry === undefined) model.failed = false;
        }
        break;
      }
      case 'close': {
        model.closed = true;
        h.state.closed = true;
        h.manager.closeAll();
        observers.splice(0);
        model.observers = 0;
        model.entry = undefined;
        model.subscribed = false;
        h.disconnects.complete();
        break;
      }
    }
    await settle();
    if (!watcher) continue;
    const { told } = watcher;
    const state = expected(model);
    expect(told.at(-1)!.state, `after ${step.kind}`).toBe(state);
    if (gap !== undefined) {
      expect(told.slice(before).map((s) => s.state)).toEqual(['gap', 'subscribed']);
      expect(told.at(-2)!.missed).toBe(gap);
    }
  }
  if (!watcher) return;
  checkRepeats(watcher.told);
  expect(watcher.done).toBe(model.closed);
  watcher.subscription.unsubscribe();
}

describe('subscriptionStatus$, model-based', () => {
  it('tells the model’s state after every step, without repeating one', async () => {
    await fc.assert(
      // Full-length runs (at the default size a run is ~5 steps), and the case that needs a
      // status observer of its own: one that looks while a hole is filled.
      fc.asyncProperty(fc.array(op, { maxLength: 40, size: 'max' }), (ops) => run(ops)),
      {
        numRuns: 300,
        examples: [
          [
            [
              { kind: 'watch' },
              { kind: 'observe' },
              { kind: 'reply' },
              { kind: 'hole' },
              { kind: 'watch' },
              { kind: 'reply' },
            ],
          ],
        ],
      },
    );
  });

  it('a loss before the first reply stays connecting; after one, resuming', async () => {
    await run([
      { kind: 'observe' },
      { kind: 'drop' },
      { kind: 'reopen' },
      { kind: 'reply' },
      { kind: 'drop' },
      { kind: 'reopen' },
      { kind: 'reply' },
      { kind: 'gap' },
      { kind: 'leave' },
    ]);
  });
});

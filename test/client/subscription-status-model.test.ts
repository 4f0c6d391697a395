/*
 * Model-based property test of subscriptionStatus$ over the client's subscription manager
 * (src/client/subscriptions.ts), driven in memory: a scripted caller stands for the connection
 * (subscribe calls that the test answers, refuses or loses with the connection), and random
 * runs of observers coming and going, replies, refusals, lost and regained connections, gap
 * signals, messages, holes in the sequence (the client resubscribes from the last message
 * seen), the server's answer to such a resubscribe that replays what the client missed (all of
 * it, all but what history no longer holds, or a topic numbered anew), a status observer that
 * goes away and one that looks afresh (it never saw the entry accepted), and the client's close
 * are checked against a model of the states
 * (connecting, subscribed, resuming, gap, error, closed). After every step the last status told
 * is the model's; a state is never told twice in a row (a gap excepted: gap, then subscribed); a
 * gap is told with its count and the position after it; and a replay reaches every Observer of
 * the data once, in order.
 */
import fc from 'fast-check';
import type { Subscription } from 'rxjs';
import { describe, expect, it } from 'vitest';
import type { RpcClient } from '../../src/client/client.js';
import { subscriptionStatus$ } from '../../src/client/subscription-status.js';
import type { SubscriptionStatus } from '../../src/client/subscription-status.js';
import { ClientSubscriptions, managers } from '../../src/client/subscriptions.js';
import type { SubscriptionCaller, SubscriptionEvent } from '../../src/client/subscriptions.js';
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
  | { kind: 'fill'; outcome: 'all' | 'lost' | 'anew'; more: number }
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
  { weight: 3, arbitrary: fc.constant({ kind: 'hole' } as const) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('fill' as const),
      outcome: fc.constantFrom('all' as const, 'lost' as const, 'anew' as const),
      more: fc.nat(2),
    }),
  },
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
    get connection() {
      return state.open ? state : undefined;
    },
    callOn: () => Promise.resolve(true),
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
  /** The last seq the client has seen. */
  seq: number;
  /** The topic's last seq on the server: past `seq` while a hole is not filled yet. */
  published: number;
  /** Numberings the topic had (each 'anew' starts one). */
  epochs: number;
  /** Holes the current entry filled by resubscribing (RESYNC_BUDGET a minute, then gaps). */
  resyncs: number;
  closed: boolean;
}

/** How many holes a minute the client fills by resubscribing (RESYNC_BUDGET). */
const RESYNC_BUDGET = 5;

/** An Observer of the subscription's data, and what it was given. */
interface DataObserver {
  subscription: Subscription;
  events: SubscriptionEvent<unknown>[];
}

/** A message as the data Observers see it: its seq, or a gap signal's count. */
const seen = (event: SubscriptionEvent<unknown>): number | { gap: number | null } =>
  event.gap !== undefined ? { gap: event.gap } : event.seq!;

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
  const observers: DataObserver[] = [];
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
    published: 0,
    epochs: 0,
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
    /** A gap signal the step gives: its count, and the client's position after it. */
    let gap: { missed: number | null; seq: number } | undefined;
    /** A step that answers a resubscribe: 'subscribed' first, when the status was not. */
    let answered = false;
    /** A step that made a hole and answered the resubscribe: 'resuming', then 'subscribed'. */
    let resumed = false;
    /** What the step gives every Observer of the data. */
    let given: ReturnType<typeof seen>[] | undefined;
    const had = observers.map((o) => o.events.length);
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
        const observer: DataObserver = { subscription: undefined as never, events: [] };
        observer.subscription = h.manager.observe(TOPIC).subscribe({
          next: (event) => observer.events.push(event),
          error: () => undefined,
          complete: () => undefined,
        });
        observers.push(observer);
        break;
      }
      case 'leave': {
        const observer = observers.shift();
        if (!observer) break;
        observer.subscription.unsubscribe();
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
          // The position follows the reply, as the gateway sends it: the last seq seen (a
          // server with nothing more: a hole not filled yet is not owed).
          model.published = model.seq;
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
          model.seq += 3;
          gap = { missed: 3, seq: model.seq };
          given = [{ gap: 3 }];
          h.manager.handleNotification({ subscription: model.id!, gap: 3 }, 0);
        } else {
          h.manager.handleNotification(
            { subscription: model.id!, result: model.seq + 1, seq: ++model.seq },
            0,
          );
          given = [model.seq];
        }
        model.published = model.seq;
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
          given = [];
          attempt();
        } else {
          gap = { missed: 1, seq: seq - 1 };
          given = [{ gap: 1 }, seq];
          model.seq = seq;
        }
        model.published = seq;
        h.manager.handleNotification({ subscription: model.id!, result: seq, seq }, 0);
        break;
      }
      case 'fill': {
        // The server accepts the current resubscribe from the last message seen (after a hole,
        // or a lost connection) and replays what came after it, `more` published meanwhile
        // included, each once; then live messages go on from there. History may no longer hold
        // the first of them (a gap of 1), or the topic was numbered anew (a gap of unknown size
        // with the new epoch, then its history from 1). A first subscribe is no resume. With no
        // resubscribe waiting, a subscribed entry makes one first: a hole, as in 'hole'.
        if (model.entry === undefined || !model.acceptedOnce) break;
        if (model.subscribed && model.resyncs < RESYNC_BUDGET) {
          model.resyncs++;
          model.subscribed = false;
          attempt();
          model.published = model.seq + 2;
          h.manager.handleNotification(
            { subscription: model.id!, result: model.published, seq: model.published },
            0,
          );
          await settle();
          resumed = true;
        }
        const i = h.calls.findIndex((c) => c.sent && current(c));
        if (i < 0) break;
        const [call] = h.calls.splice(i, 1);
        const id = `0x${(++h.state.ids).toString(16)}`;
        call!.accept(id);
        model.subscribed = true;
        model.id = id;
        answered = true;
        given = [];
        let first = model.seq + 1;
        let last = model.published + step.more;
        if (step.outcome === 'anew') {
          const epoch = `e${++model.epochs}`;
          h.manager.handleNotification({ subscription: id, gap: null, epoch }, 0);
          gap = { missed: null, seq: 0 };
          given.push({ gap: null });
          first = 1;
          last = step.more + 1;
        } else if (step.outcome === 'lost' && first <= last) {
          h.manager.handleNotification({ subscription: id, gap: 1 }, 0);
          gap = { missed: 1, seq: first };
          given.push({ gap: 1 });
          first++;
        }
        for (let seq = first; seq <= last; seq++) {
          h.manager.handleNotification({ subscription: id, result: seq, seq }, 0);
          given.push(seq);
        }
        model.seq = model.published = last;
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
    if (given !== undefined && model.entry !== undefined) {
      // Every Observer there before the step is given the same, each message once.
      observers.forEach((o, i) => {
        if (i < had.length) expect(o.events.slice(had[i]).map(seen), step.kind).toEqual(given);
      });
    }
    if (!watcher) continue;
    const { told } = watcher;
    const state = expected(model);
    expect(told.at(-1)!.state, `after ${step.kind}`).toBe(state);
    const now = told.slice(before);
    if (resumed) {
      expect(now.slice(0, 2).map((s) => s.state)).toEqual(['resuming', 'subscribed']);
      now.splice(0, 2);
    } else if (answered && before > 0 && told[before - 1]!.state !== 'subscribed') {
      expect(now[0]?.state, 'the resubscribe accepted').toBe('subscribed');
      now.shift();
    }
    if (gap !== undefined) {
      expect(now.map((s) => s.state)).toEqual(['gap', 'subscribed']);
      expect(now[0]!.missed).toBe(gap.missed);
      expect(now.map((s) => s.seq)).toEqual([gap.seq, gap.seq]);
    } else if (answered) {
      expect(now, 'a replay that lost nothing tells nothing more').toEqual([]);
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
      fc.asyncProperty(fc.array(op, { maxLength: 60, size: 'max' }), (ops) => run(ops)),
      {
        numRuns: 500,
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

  it('a resubscribe answered with a replay: all of it, all but what history lost, or anew', async () => {
    await run([
      { kind: 'observe' },
      { kind: 'observe' },
      { kind: 'reply' },
      { kind: 'message' },
      { kind: 'hole' },
      { kind: 'fill', outcome: 'all', more: 1 },
      { kind: 'message' },
      { kind: 'drop' },
      { kind: 'reopen' },
      { kind: 'fill', outcome: 'lost', more: 2 },
      { kind: 'fill', outcome: 'anew', more: 1 },
      { kind: 'message' },
      { kind: 'hole' },
      { kind: 'message' },
      { kind: 'leave' },
    ]);
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

/*
 * A topic whose numbering goes back without a new epoch (a restarted or buggy server) is never
 * lost in silence: the client drops a message as a duplicate only while it can be a replay's
 * overlap (from where the server said the delivery starts up to the last seen); below that the
 * topic was numbered anew, told as a gap of unknown size (`gap: null`), and the message is
 * delivered. Against a `ws` server scripted by each test (real sockets):
 * - 1, 2, 3, then 2**52 past the resync budget, then 4, 5: 4 and 5 come after a gap-null signal;
 * - the duplicates a replay sends after a real resubscribe (and a reconnect's) are still dropped;
 * - a new epoch on an epoch-only frame, a message or a position is told as gap null, once (the
 *   gateway's gap null with the epoch is that signal); a position at or below the last seq seen
 *   moves nothing, one past it (messages published `except` the session) is no hole;
 * - a model: random server numberings (in order, replay overlaps, holes, far jumps ahead, jumps
 *   back), each frame read before the next is sent (a probe request answered in order): every
 *   seq sent is delivered, or dropped as a copy of one delivered in the same numbering (or of
 *   where the server said delivery starts: the position, a gap's end), or asked for again by a
 *   resubscribe; nothing twice or backwards within one numbering; and without jumps, each seq
 *   published is delivered once, covered by a gap signal or passed by a position (`except`), with
 *   one gap of unknown size per new epoch (told by an epoch-only frame, on the messages, or as a
 *   gap null with the epoch), and none else, through positions sent back as a faulty server may.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { RpcClient } from '../../src/client/client.js';
import type { SubscriptionEvent } from '../../src/client/subscriptions.js';
import { FakeGateways, framesOf, note, reply } from '../support/fake-gateway.js';
import { CaptureLogger } from '../support/logging.js';
import { waitFor } from '../support/waiting.js';

const gateways = new FakeGateways({ reconnect: { initialDelayMs: 20, maxDelayMs: 50 } });
const { subscriptions } = gateways;
afterEach(() => gateways.cleanup());

const client = (url: string, options: Record<string, unknown> = {}): RpcClient =>
  gateways.client({ url, ...options });

/** What an Observer of `subscribeWithMeta('feed')` saw, as `m<seq>@<seq>` and `gap(<n>)`. */
function watch(c: RpcClient): string[] {
  const got: string[] = [];
  subscriptions.push(
    c.subscribeWithMeta('feed').subscribe({
      next: (e: SubscriptionEvent<unknown>) =>
        got.push(e.gap !== undefined ? `gap(${e.gap})` : `${String(e.data)}@${e.seq}`),
      error: (err) => got.push(`ERROR ${String(err)}`),
    }),
  );
  return got;
}

/** The client's resync budget (RESYNC_BUDGET): holes filled by resubscribing, per minute. */
const RESYNC_BUDGET = 5;
const FAR = 2 ** 52;

describe('a numbering that goes back without an epoch', () => {
  it('1, 2, 3, then 2**52 past the resync budget, then 4, 5: 4 and 5 come after gap null', async () => {
    const since: unknown[] = [];
    let probeAnswered = false;
    const gateway = await gateways.listen((socket) => {
      let n = 0;
      socket.on('message', (data) => {
        for (const request of framesOf(data)) {
          if (request.id === 'probe') probeAnswered = true;
          if (request.method === 'unsubscribe') reply(socket, request.id, true);
          if (request.method !== 'subscribe') continue;
          n++;
          since.push((request.params as unknown[])[2]);
          reply(socket, request.id, `s${n}`);
          const send = (p: Record<string, unknown>) =>
            note(socket, { subscription: `s${n}`, ...p });
          if (n === 1) {
            send({ seq: 0 });
            for (let s = 1; s <= 3; s++) send({ seq: s, result: `m${s}` });
          }
          // A hole: the client resubscribes from 3 while its budget lasts, then tells a gap.
          send({ seq: FAR, result: 'far' });
          if (n < RESYNC_BUDGET + 1) continue;
          for (let s = 4; s <= 5; s++) send({ seq: s, result: `m${s}` });
          // Answered once the client has read everything before it.
          socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'probe', id: 'probe' }));
        }
      });
    });
    const logger = new CaptureLogger();
    const got = watch(client(gateway.url, { logger }));
    await waitFor(() => probeAnswered, 'the client to read everything');
    expect(got).toEqual([
      'm1@1',
      'm2@2',
      'm3@3',
      `gap(${FAR - 4})`,
      `far@${FAR}`,
      'gap(null)',
      'm4@4',
      'm5@5',
    ]);
    expect(since).toEqual([{ position: true }, ...Array(RESYNC_BUDGET).fill({ since: 3 })]);
    expect(logger.withMessage('subscription: numbered anew')).toEqual([
      expect.objectContaining({ level: 'warn', obj: expect.objectContaining({ seq: 4 }) }),
    ]);
  });

  it('the duplicates of a replay after a resubscribe, and after a reconnect, are dropped', async () => {
    const since: unknown[] = [];
    const gateway = await gateways.listen((socket, connection) => {
      socket.on('message', (data) => {
        for (const request of framesOf(data)) {
          if (request.method === 'unsubscribe') reply(socket, request.id, true);
          if (request.method !== 'subscribe') continue;
          since.push((request.params as unknown[])[2]);
          const id = `s${since.length}`;
          reply(socket, request.id, id);
          const send = (...seqs: number[]) => {
            for (const seq of seqs) note(socket, { subscription: id, seq, result: `m${seq}` });
          };
          if (since.length === 1) {
            note(socket, { subscription: id, seq: 0 });
            send(1, 2, 3, 5); // 4 lost on the way: the client resubscribes from 3
          } else if (connection === 1) {
            // The replay from 3, then live messages overlapping it, then the next one.
            send(4, 5, 4, 5, 6);
          } else {
            // After a reconnect from 6: a replay that takes `since` in, and overlaps itself.
            send(6, 7, 7, 8);
          }
        }
      });
    });
    const c = client(gateway.url);
    const got = watch(c);
    await waitFor(
      () => got.includes('m6@6'),
      () => `only ${got.join(', ')}`,
    );
    gateway.sockets[0]!.close(1001);
    await waitFor(
      () => got.includes('m8@8'),
      () => `only ${got.join(', ')}`,
    );
    expect(got).toEqual(['m1@1', 'm2@2', 'm3@3', 'm4@4', 'm5@5', 'm6@6', 'm7@7', 'm8@8']);
    expect(since).toEqual([{ position: true }, { since: 3 }, { since: 6 }]);
  });
});

/**
 * A server that answers the first subscribe with `frames` (each a notification's params, the
 * subscription id added), then a probe request answered once the client has read them all; a
 * later subscribe (a resume) is answered with nothing. Returns what the Observer saw, each
 * subscribe's options, and the gateway (to drop its connection).
 */
async function scripted(frames: Record<string, unknown>[]) {
  const since: unknown[] = [];
  let probeAnswered = false;
  const gateway = await gateways.listen((socket) => {
    socket.on('message', (data) => {
      for (const request of framesOf(data)) {
        if (request.id === 'probe') probeAnswered = true;
        if (request.method === 'unsubscribe') reply(socket, request.id, true);
        if (request.method !== 'subscribe') continue;
        since.push((request.params as unknown[])[2]);
        const id = `s${since.length}`;
        reply(socket, request.id, id);
        if (since.length > 1) continue;
        for (const frame of frames) note(socket, { subscription: id, ...frame });
        socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'probe', id: 'probe' }));
      }
    });
  });
  const logger = new CaptureLogger();
  const got = watch(client(gateway.url, { logger }));
  await waitFor(() => probeAnswered, 'the client to read everything');
  return { got, since, gateway, logger };
}

/** Messages `from`..`to`, their data `<prefix><seq>`, with `extra` fields. */
function messages(prefix: string, from: number, to: number, extra: object = {}) {
  const made: Record<string, unknown>[] = [];
  for (let seq = from; seq <= to; seq++) made.push({ seq, result: `${prefix}${seq}`, ...extra });
  return made;
}

const seen = (prefix: string, from: number, to: number): string[] =>
  messages(prefix, from, to).map((m) => `${String(m['result'])}@${String(m['seq'])}`);

describe('a new epoch, and a position in mid-stream', () => {
  it('an epoch-only frame with a new epoch: gap null, then the new numbering from 1', async () => {
    const { got, since, gateway } = await scripted([
      { seq: 0, epoch: 'A' },
      ...messages('a', 1, 5),
      { epoch: 'B' },
      ...messages('b', 1, 3),
    ]);
    expect(got).toEqual([...seen('a', 1, 5), 'gap(null)', ...seen('b', 1, 3)]);
    // A resume asks for what follows in the new numbering.
    gateway.sockets[0]!.close(1001);
    await waitFor(() => since.length === 2, 'the resubscribe');
    expect(since).toEqual([{ position: true }, { since: 3, epoch: 'B' }]);
  });

  it('messages that carry a new epoch: gap null before the first of them', async () => {
    const { got } = await scripted([
      { seq: 0, epoch: 'A' },
      ...messages('a', 1, 5, { epoch: 'A' }),
      ...messages('b', 1, 3, { epoch: 'B' }),
    ]);
    expect(got).toEqual([...seen('a', 1, 5), 'gap(null)', ...seen('b', 1, 3)]);
  });

  it('a new epoch is told where its first seq is the one the old numbering expected next', async () => {
    // Seq 1 follows position 0 in the count alone: the numbering is another.
    const { got } = await scripted([
      { seq: 0, epoch: 'A' },
      ...messages('b', 1, 3, { epoch: 'B' }),
    ]);
    expect(got).toEqual(['gap(null)', ...seen('b', 1, 3)]);
  });

  it("the gateway's way (gap null with the new epoch, then its frames) is told once", async () => {
    const { got, logger } = await scripted([
      { seq: 0 },
      ...messages('a', 1, 2),
      // An epoch first told when none was known, then again: nothing to tell.
      { epoch: 'A' },
      ...messages('a', 3, 4, { epoch: 'A' }),
      { gap: null, epoch: 'B' },
      ...messages('b', 1, 2, { epoch: 'B' }),
      { epoch: 'B' },
      { seq: 2, epoch: 'B' },
      ...messages('b', 3, 3),
      // A topic numbered anew before it had an epoch: gap null without one, the epoch after.
      { gap: null },
      { epoch: 'C' },
      ...messages('c', 1, 2),
    ]);
    expect(got).toEqual([
      ...seen('a', 1, 4),
      'gap(null)',
      ...seen('b', 1, 3),
      'gap(null)',
      ...seen('c', 1, 2),
    ]);
    expect(logger.withMessage('subscription: numbered anew')).toEqual([]);
  });

  it('a position with a new epoch is the start of the new numbering, after gap null', async () => {
    const { got, since } = await scripted([
      { seq: 0, epoch: 'A' },
      ...messages('a', 1, 3),
      { seq: 7, epoch: 'B' },
      ...messages('b', 8, 9),
    ]);
    expect(got).toEqual([...seen('a', 1, 3), 'gap(null)', ...seen('b', 8, 9)]);
    expect(since).toEqual([{ position: true }]);
  });

  it('a position at or below the last seen moves nothing: what follows up to it is a duplicate', async () => {
    const { got, since } = await scripted([
      { seq: 0, epoch: 'A' },
      ...messages('m', 1, 5),
      { seq: 2, epoch: 'A' },
      ...messages('m', 3, 7),
      { seq: 7, epoch: 'A' },
      ...messages('m', 7, 8),
    ]);
    expect(got).toEqual(seen('m', 1, 8));
    expect(since).toEqual([{ position: true }]);
  });

  it('a position past the last seen (messages published except this session) is no hole', async () => {
    const { got, since } = await scripted([
      { seq: 0, epoch: 'A' },
      ...messages('m', 1, 3),
      { seq: 10, epoch: 'A' },
      ...messages('m', 11, 12),
    ]);
    expect(got).toEqual([...seen('m', 1, 3), ...seen('m', 11, 12)]);
    expect(since).toEqual([{ position: true }]);
  });
});

/** What the model server does next. */
type Step =
  | { k: 'next' }
  /** Publish `n` that are lost on the way (history keeps them), then one sent. */
  | { k: 'hole'; n: number }
  /** Send again one of the last sent on this subscription (a replay's overlap). */
  | { k: 'dup'; back: number }
  /** The numbering leaps far ahead (history does not hold what it skips). */
  | { k: 'far' }
  /** The numbering starts again lower, without an epoch: `at` of the way from 1 to the last. */
  | { k: 'back'; at: number }
  /**
   * The topic is numbered anew from 1 under a new epoch, told by an epoch-only frame, on the
   * messages (from here on every message carries its epoch), or as the gateway tells it: a gap
   * of unknown size with the epoch, or (a topic that had none yet) without it, the epoch after.
   */
  | { k: 'epoch'; how: 'frame' | 'message' | 'gap' | 'gap, then epoch' }
  /** Publish `n` except this session: history keeps them, the subscriber gets a position. */
  | { k: 'pass'; n: number }
  /** A position (a faulty server's) `at` of the way from 0 to the last seq sent. */
  | { k: 'low'; at: number };

/** A frame the server sends, and what the client must make of it. */
type Frame =
  | { kind: 'data'; id: string; seq: number; epoch?: string }
  | { kind: 'gap'; id: string; gap: number; since: number }
  | { kind: 'position'; id: string; seq: number; epoch: string }
  /** A new numbering: an epoch-only frame, or a gap of unknown size (with its epoch or not). */
  | { kind: 'renumber'; id: string; epoch: string | undefined; gap: boolean }
  /** The epoch of a numbering already told (by a gap of unknown size that named none). */
  | { kind: 'epoch'; id: string; epoch: string }
  | { kind: 'reply'; id: string; request: number | string | undefined };

/**
 * One run: a client subscribed to `feed` against a server that plays `steps`, every frame read
 * by the client before the next goes (a probe request after each, answered in order). Checks
 * each frame as it is read; returns how the run went.
 */
async function play(
  steps: Step[],
): Promise<{ nullGaps: number; renumberings: number; unaccounted: number[] }> {
  const queue: Frame[] = [];
  /** The subscribes read since the last frame checked: their `since`. */
  const sinces: number[] = [];
  let probeAnswered: (() => void) | undefined;
  let current = '';
  let subscribes = 0;
  // The server's topic: what its history holds of the current numbering, and the last seq.
  let history: number[] = [];
  let last = 0;
  /** Sent on the current subscription since its start or the last break (hole, leap, jump back). */
  let recent: number[] = [];
  /** The numbering's epoch, how many times it changed, and whether messages carry it. */
  let epoch = 'e0';
  let renumberings = 0;
  let epochOnMessages = false;
  /** Seqs of the current numbering published except this session (told by a position). */
  let excepted = new Set<number>();
  /** Resubscribes that named another epoch than the topic's. */
  const staleEpochs: unknown[] = [];
  /** A message of the current numbering, with its epoch once messages carry it. */
  const dataFrame = (id: string, seq: number): Frame =>
    epochOnMessages ? { kind: 'data', id, seq, epoch } : { kind: 'data', id, seq };

  const gateway = await gateways.listen((socket) => {
    socket.on('message', (data) => {
      for (const frame of framesOf(data)) {
        if (typeof frame.id === 'string' && frame.id.startsWith('probe')) {
          probeAnswered?.();
        } else if (frame.method === 'unsubscribe') {
          const id = (frame.params as [string])[0];
          // Nothing more goes to it.
          for (let i = queue.length - 1; i >= 0; i--) if (queue[i]!.id === id) queue.splice(i, 1);
          reply(socket, frame.id, true);
        } else if (frame.method === 'subscribe') {
          const options = (frame.params as unknown[])[2] as { since?: number; epoch?: string };
          const id = `s${++subscribes}`;
          current = id;
          recent = [];
          queue.push({ kind: 'reply', id, request: frame.id });
          if (options.since === undefined) {
            queue.push({ kind: 'position', id, seq: last, epoch });
            continue;
          }
          const since = options.since;
          sinces.push(since);
          if (options.epoch !== epoch) staleEpochs.push(options.epoch);
          // Replay as the gateway does: a counted gap where history no longer reaches, then
          // everything it holds after `since`.
          const after = history.filter((seq) => seq > since);
          if (after.length > 0 && after[0]! > since + 1)
            queue.push({ kind: 'gap', id, gap: after[0]! - since - 1, since });
          for (const seq of after) queue.push(dataFrame(id, seq));
        }
      }
    });
  });

  const c = client(gateway.url, { reconnect: false });
  const events: SubscriptionEvent<unknown>[] = [];
  subscriptions.push(c.subscribeWithMeta('feed').subscribe((e) => events.push(e)));
  await waitFor(() => queue.length > 0, 'the first subscribe');
  const socket = gateway.sockets[0]!;

  // The client's side, as it must be: per numbering (from a gap of unknown size on), what
  // was delivered and what gap signals covered.
  let delivered = new Set<number>();
  let highest = -1;
  let covered: [number, number][] = [];
  /** Where the server said delivery starts: the position, and each gap's end. */
  let starts = new Set<number>();
  let nullGaps = 0;
  const isCovered = (seq: number) => covered.some(([from, to]) => from <= seq && seq <= to);

  const check = (frame: Frame, seen: SubscriptionEvent<unknown>[], asked: number[]) => {
    const where = `${frame.kind} ${'seq' in frame ? frame.seq : ''}: ${JSON.stringify(seen)}`;
    if (frame.kind === 'gap') {
      expect(seen, where).toEqual([{ data: undefined, gap: frame.gap }]);
      covered.push([frame.since + 1, frame.since + frame.gap]);
      starts.add(frame.since + frame.gap);
      return;
    }
    if (frame.kind === 'renumber') {
      // Told once, whichever way: the numbering starts again.
      expect(seen, where).toEqual([{ data: undefined, gap: null }]);
      nullGaps++;
      delivered = new Set();
      highest = -1;
      covered = [];
      starts = new Set();
      return;
    }
    // A position past the last delivered is where delivery starts; one below it changes nothing.
    if (frame.kind === 'position' && frame.seq > highest) starts.add(frame.seq);
    if (frame.kind !== 'data') {
      expect(seen, where).toEqual([]);
      return;
    }
    const seq = frame.seq;
    const message = seen.at(-1);
    if (message === undefined) {
      // Dropped: a copy of one delivered, or of where the server said delivery starts, or
      // asked for again by a resubscribe from below it. A seq a gap signal covered is not
      // enough: the server sent it after all.
      const dropped = delivered.has(seq) || starts.has(seq) || asked.some((since) => since < seq);
      expect(dropped, `dropped without a word: ${where}`).toBe(true);
      return;
    }
    expect(message, where).toEqual({ data: `v${seq}`, seq });
    expect(seen.length, where).toBeLessThanOrEqual(2);
    const signal = seen.length === 2 ? seen[0]! : undefined;
    if (signal) {
      expect(signal.data, where).toBeUndefined();
      if (signal.gap === null) {
        nullGaps++;
        delivered = new Set();
        highest = -1;
        covered = [];
        starts = new Set();
      } else {
        expect(typeof signal.gap, where).toBe('number');
        covered.push([seq - signal.gap!, seq - 1]);
        starts.add(seq - 1);
      }
    }
    // In order within a numbering: nothing twice, nothing back without a word.
    expect(seq, `delivered out of order: ${where}`).toBeGreaterThan(highest);
    highest = seq;
    delivered.add(seq);
  };

  let probes = 0;
  const sendAndCheck = async (frame: Frame): Promise<void> => {
    const from = events.length;
    const asked = sinces.length;
    if (frame.kind === 'reply') reply(socket, frame.request, frame.id);
    else if (frame.kind === 'position')
      note(socket, { subscription: frame.id, seq: frame.seq, epoch: frame.epoch });
    else if (frame.kind === 'gap') note(socket, { subscription: frame.id, gap: frame.gap });
    else if (frame.kind === 'renumber' || frame.kind === 'epoch')
      note(socket, {
        subscription: frame.id,
        epoch: frame.epoch,
        ...(frame.kind === 'renumber' && frame.gap && { gap: null }),
      });
    else
      note(socket, {
        subscription: frame.id,
        seq: frame.seq,
        result: `v${frame.seq}`,
        epoch: frame.epoch,
      });
    const answered = new Promise<void>((resolve) => (probeAnswered = resolve));
    socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'probe', id: `probe${++probes}` }));
    await answered;
    check(frame, events.slice(from), sinces.slice(asked));
  };
  const drain = async (): Promise<void> => {
    while (queue.length > 0) await sendAndCheck(queue.shift()!);
  };
  const live = (seq: number): Promise<void> => {
    history.push(seq);
    last = seq;
    recent.push(seq);
    return sendAndCheck(dataFrame(current, seq));
  };

  await drain();
  for (const step of steps) {
    if (step.k === 'dup' && recent.length > 0) {
      const seq = recent[Math.max(0, recent.length - 1 - step.back)]!;
      await sendAndCheck(dataFrame(current, seq));
    } else if (step.k === 'hole') {
      for (let i = 0; i < step.n; i++) history.push(++last);
      recent = [];
      await live(last + 1);
    } else if (step.k === 'far') {
      recent = [];
      await live(last + 2 ** 40);
    } else if (step.k === 'back' && last > 1) {
      history = [];
      recent = [];
      await live(1 + Math.floor(step.at * (last - 1)));
    } else if (step.k === 'epoch') {
      epoch = `e${++renumberings}`;
      history = [];
      recent = [];
      excepted = new Set();
      last = 0;
      if (step.how === 'message') epochOnMessages = true;
      else if (step.how === 'gap, then epoch') {
        await sendAndCheck({ kind: 'renumber', id: current, epoch: undefined, gap: true });
        await sendAndCheck({ kind: 'epoch', id: current, epoch });
      } else await sendAndCheck({ kind: 'renumber', id: current, epoch, gap: step.how === 'gap' });
      await live(1);
    } else if (step.k === 'pass') {
      for (let i = 0; i < step.n; i++) {
        history.push(++last);
        excepted.add(last);
      }
      recent = [];
      await sendAndCheck({ kind: 'position', id: current, seq: last, epoch });
    } else if (step.k === 'low') {
      const seq = Math.floor(step.at * last);
      await sendAndCheck({ kind: 'position', id: current, seq, epoch });
    } else {
      await live(last + 1);
    }
    await drain();
  }
  // What the current numbering's history holds and the client neither has nor was told of.
  const unaccounted = history.filter(
    (seq) => !delivered.has(seq) && !isCovered(seq) && !excepted.has(seq),
  );
  expect(staleEpochs, "a resubscribe named an epoch not the topic's").toEqual([]);
  return { nullGaps, renumberings, unaccounted };
}

/** Everything one run made, closed before the next. */
const endRun = (): Promise<void> => gateways.cleanup();

const normalStep: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.constant<Step>({ k: 'next' }) },
  {
    weight: 2,
    arbitrary: fc.record({ k: fc.constant('hole' as const), n: fc.integer({ min: 1, max: 3 }) }),
  },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('dup' as const), back: fc.nat(3) }) },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant('pass' as const), n: fc.integer({ min: 1, max: 3 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant('low' as const),
      at: fc.double({ min: 0, max: 1, noNaN: true }),
    }),
  },
);
const epochStep: fc.Arbitrary<Step> = fc.record({
  k: fc.constant('epoch' as const),
  how: fc.constantFrom(
    'frame' as const,
    'message' as const,
    'gap' as const,
    'gap, then epoch' as const,
  ),
});
/** In order, overlaps, holes, passes, positions back, and new epochs: what a server may say. */
const toldStep: fc.Arbitrary<Step> = fc.oneof(
  { weight: 8, arbitrary: normalStep },
  { weight: 1, arbitrary: epochStep },
);
const anyStep: fc.Arbitrary<Step> = fc.oneof(
  { weight: 7, arbitrary: toldStep },
  { weight: 1, arbitrary: fc.constant<Step>({ k: 'far' }) },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant('back' as const),
      at: fc.double({ min: 0, max: 1, noNaN: true }),
    }),
  },
);

describe('the client against random server numberings (model)', () => {
  it('every seq sent is delivered, dropped as a copy of one delivered, or asked for again', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(anyStep, { maxLength: 30 }), async (steps) => {
        try {
          await play(steps);
        } finally {
          await endRun();
        }
      }),
      { numRuns: 100 },
    );
  });

  it('without far leaps or jumps back: each seq delivered once or covered, gap null once per new epoch', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(toldStep, { maxLength: 30 }), async (steps) => {
        try {
          const { nullGaps, renumberings, unaccounted } = await play(steps);
          expect(nullGaps).toBe(renumberings);
          expect(unaccounted).toEqual([]);
        } finally {
          await endRun();
        }
      }),
      { numRuns: 100 },
    );
  });
});

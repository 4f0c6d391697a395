import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Delivery } from '../../src/pubsub/delivery.js';
import type { SlowConsumerPolicy } from '../../src/pubsub/delivery.js';
import { messageTail, notificationHead } from '../../src/pubsub/frames.js';
import type { Sink } from '../../src/pubsub/sink.js';
import type { Broker } from '../../src/pubsub/broker.js';
import { sendLatestValue } from '../../src/server/pubsub-latest.js';

/** A socket whose buffered bytes the test sets, recording the params of each frame. */
class Socket implements Sink {
  /** The session it is: a message published except "me" passes its subscriptions by. */
  readonly id = 'me';
  readonly frames: Record<string, unknown>[] = [];
  bufferedAmount = 0;
  private drained: (() => void) | undefined;

  send(frame: string | { bytes: Uint8Array }): void {
    const text = typeof frame === 'string' ? frame : new TextDecoder().decode(frame.bytes);
    this.frames.push((JSON.parse(text) as { params: Record<string, unknown> }).params);
  }

  close(): void {}

  onDrain(listener: () => void): () => void {
    this.drained = listener;
    return () => (this.drained = undefined);
  }

  drain(): void {
    this.bufferedAmount = 0;
    this.drained?.();
  }
}

function subscriber(policy: SlowConsumerPolicy = 'drop') {
  const socket = new Socket();
  const delivery = new Delivery(
    socket,
    {
      head: notificationHead('subscription'),
      flow: { slowConsumer: policy, highWaterMark: 100 },
      onSlowConsumer: () => undefined,
    },
    '"0x1"',
  );
  delivery.resumable = true;
  const offer = (seq: number) => delivery.offer(messageTail(String(seq), seq), undefined, seq);
  return { socket, delivery, offer };
}

/**
 * Each frame as the subscriber reads it: a message (`seq`, and `missed` when some were skipped), a
 * position (`{"seq"}` alone: its numbering now stands there) or a gap signal.
 */
const summary = (socket: Socket) =>
  socket.frames.map(({ seq, missed, gap, result }) =>
    gap !== undefined
      ? { gap }
      : result === undefined
        ? { position: seq }
        : missed === undefined
          ? { seq }
          : { seq, missed },
  );

/**
 * What a position-tracking client concludes from the frames: every message follows on from the
 * last position, message, `missed` or gap it was told (a hole would be a loss in silence).
 */
function holesSeen(socket: Socket): number {
  let last: number | undefined;
  let holes = 0;
  for (const { seq, missed, gap, result } of socket.frames as {
    seq?: number;
    missed?: number;
    gap?: number;
    result?: unknown;
  }[]) {
    if (gap !== undefined) {
      if (last !== undefined) last += gap;
    } else if (result === undefined) {
      last = seq;
    } else {
      if (last !== undefined && seq !== last + (missed ?? 0) + 1) holes++;
      last = seq;
    }
  }
  return holes;
}

describe('a message passed by (published except the subscriber)', () => {
  it('a position-tracking subscriber is told its new position instead: no hole, no message', () => {
    const { socket, delivery, offer } = subscriber();
    delivery.sendPosition(0, undefined);
    offer(1);
    delivery.pass(2);
    delivery.pass(3);
    offer(4);
    expect(summary(socket)).toEqual([
      { position: 0 },
      { seq: 1 },
      { position: 2 },
      { position: 3 },
      { seq: 4 },
    ]);
    expect(holesSeen(socket)).toBe(0);
  });

  it('another subscriber is told nothing, and its next message shows no hole either', () => {
    const { socket, delivery, offer } = subscriber();
    delivery.resumable = false;
    offer(1);
    delivery.pass(2);
    offer(3);
    expect(summary(socket)).toEqual([{ seq: 1 }, { seq: 3 }]);
  });

  it('during a replay: held live messages and passed ones follow the history without a gap', () => {
    const { socket, delivery, offer } = subscriber();
    delivery.pauseForReplay(0);
    offer(2);
    delivery.pass(3);
    offer(4);
    delivery.resume(0, [{ tail: messageTail('1', 1), seq: 1 }]);
    expect(summary(socket)).toEqual([{ seq: 1 }, { seq: 2 }, { position: 3 }, { seq: 4 }]);
    expect(holesSeen(socket)).toBe(0);
  });

  it('after a held message (keep-latest): neither a gap nor a passed seq counted as missed', () => {
    const { socket, delivery, offer } = subscriber('keep-latest');
    delivery.sendPosition(0, undefined);
    socket.bufferedAmount = 1_000;
    offer(1); // held
    delivery.pass(2);
    socket.drain(); // writes 1
    offer(3);
    expect(summary(socket)).toEqual([{ position: 0 }, { seq: 1 }, { position: 2 }, { seq: 3 }]);
    expect(holesSeen(socket)).toBe(0);
  });

  it('a held backlog trimmed where the history overlapped, then a passed seq: no false gap', () => {
    for (const policy of ['drop', 'keep-latest'] as const) {
      const { socket, delivery, offer } = subscriber(policy);
      // A replay from the start; live 3..6 and 8 are held meanwhile (past the mark the oldest
      // are dropped, the history has them), 7 was published except this subscriber.
      delivery.pauseForReplay(0);
      for (const seq of [3, 4, 5, 6]) offer(seq);
      delivery.pass(7);
      offer(8);
      expect(delivery.replayBegin(0, undefined, undefined, true)).toBe('more');
      const page = [1, 2, 3, 4, 5, 6, 7].map((seq) => ({
        tail: messageTail(String(seq), seq),
        seq,
        except: seq === 7 ? ['me'] : undefined,
      }));
      expect(delivery.replayPage(page)).toBe('more');
      // The page reached the oldest message held: the rest is the held backlog.
      expect(delivery.replayEnd()).toBe('over');
      offer(9);
      expect(summary(socket)).toEqual([
        ...[1, 2, 3, 4, 5, 6].map((seq) => ({ seq })),
        { position: 7 },
        { seq: 8 },
        { seq: 9 },
      ]);
      expect(holesSeen(socket)).toBe(0);
    }
  });

  it("passed seqs of a numbering the broker lost are forgotten: they hide none of the new one's losses", () => {
    const { socket, delivery, offer } = subscriber('drop');
    delivery.sendPosition(0, 'e1');
    offer(1);
    socket.bufferedAmount = 1_000;
    offer(2); // skipped
    delivery.pass(3); // kept as a number: something was skipped before it
    socket.bufferedAmount = 0;
    // The broker lost the topic: numbered anew (e2), its seq 3 never offered here (lost).
    delivery.epochSeen('e2', true);
    offer(1);
    offer(2);
    offer(4);
    // The new numbering's loss of 3 is told (a gap of 1), not taken for e1's passed seq 3.
    expect(summary(socket)).toEqual([
      { position: 0 },
      { seq: 1 },
      { gap: null },
      { seq: 1 },
      { seq: 2 },
      { gap: 1 },
      { seq: 4 },
    ]);
  });

  it('while the socket is full (drop): only the messages offered and skipped count as missed', () => {
    const { socket, delivery, offer } = subscriber('drop');
    delivery.sendPosition(0, undefined);
    socket.bufferedAmount = 1_000;
    offer(1); // skipped
    delivery.pass(2);
    socket.bufferedAmount = 0;
    offer(3);
    // The skipped one told first (a gap signal), then where the numbering stands.
    expect(summary(socket)).toEqual([{ position: 0 }, { gap: 1 }, { position: 2 }, { seq: 3 }]);
    expect(holesSeen(socket)).toBe(0);
  });

  it('no position names a skipped seq as passed by, whatever the order of skips and passes', () => {
    // 'free': the socket has room again before its drain event runs (offer looks at it first).
    type Op = 'offer' | 'pass' | 'full' | 'free' | 'drain';
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom<Op>('offer', 'offer', 'pass', 'full', 'free', 'drain'), {
          maxLength: 40,
        }),
        (ops) => {
          const { socket, delivery, offer } = subscriber('drop');
          delivery.sendPosition(0, undefined);
          const skipped = new Set<number>();
          let seq = 0;
          for (const op of ops) {
            if (op === 'full') socket.bufferedAmount = 1_000;
            else if (op === 'free') socket.bufferedAmount = 0;
            else if (op === 'drain') socket.drain();
            else if (op === 'pass') delivery.pass(++seq);
            else {
              if (socket.bufferedAmount >= 100) skipped.add(seq + 1);
              offer(++seq);
            }
          }
          socket.bufferedAmount = 0;
          offer(++seq);
          // The client's view after each frame (a connection may be cut after any of them): a
          // skipped seq at or below its position has been told, as a gap or as missed.
          let position = 0;
          let told = 0;
          for (const frame of socket.frames as {
            seq?: number;
            missed?: number;
            gap?: number;
            result?: unknown;
          }[]) {
            if (frame.gap !== undefined) {
              told += frame.gap;
              position += frame.gap;
            } else {
              told += frame.missed ?? 0;
              position = frame.seq!;
            }
            const skippedSoFar = [...skipped].filter((s) => s <= position).length;
            expect(skippedSoFar).toBeLessThanOrEqual(told);
          }
          // In the end, every skip told exactly once, and the last message reached.
          expect(told).toBe(skipped.size);
          expect(position).toBe(seq);
          expect(holesSeen(socket)).toBe(0);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe("a topic's latest value that cannot go into a frame", () => {
  /**
   * A subscriber that does not track positions, whose subscribe reads the latest value: message
   * 3 arrives live (held meanwhile), then the latest value, seq 2, with `payload`.
   */
  function latestAfterLive(payload: string) {
    const { socket, delivery, offer } = subscriber();
    delivery.resumable = false;
    delivery.pauseForReplay();
    offer(3);
    const broker = { trustedPayloads: false } as unknown as Broker;
    sendLatestValue(broker, delivery, { seq: 2, payload, epoch: undefined });
    return { socket, offer };
  }

  it('is told as missed by the next message, to a subscriber that does not track positions', () => {
    const { socket, offer } = latestAfterLive('not json');
    offer(4);
    expect(summary(socket)).toEqual([{ seq: 3, missed: 1 }, { seq: 4 }]);
  });

  it('one that can is sent first, then the live ones, nothing missed', () => {
    const { socket } = latestAfterLive('"two"');
    expect(summary(socket)).toEqual([{ seq: 2 }, { seq: 3 }]);
  });
});

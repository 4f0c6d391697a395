/**
 * The queues behind a subscription's delivery: the ring-backed Fifo (the replay backlog) against
 * a plain array, and the passed-by seqs (PassedSeqs) against the array bookkeeping it replaces;
 * then a Delivery passed by more seqs than it keeps, during a replay.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Delivery } from '../../src/pubsub/delivery.js';
import { Fifo } from '../../src/pubsub/fifo.js';
import { messageTail, notificationHead } from '../../src/pubsub/frames.js';
import { PassedSeqs } from '../../src/pubsub/passed-seqs.js';
import type { Sink } from '../../src/pubsub/sink.js';

type FifoOp =
  | { op: 'push'; value: number }
  | { op: 'shift' }
  | { op: 'peek' }
  | { op: 'retain'; modulo: number; rest: number }
  | { op: 'bumpFirst' };

const fifoOps = fc.array(
  fc.oneof(
    { arbitrary: fc.record({ op: fc.constant('push' as const), value: fc.integer() }), weight: 5 },
    { arbitrary: fc.record({ op: fc.constant('shift' as const) }), weight: 3 },
    fc.record({ op: fc.constant('peek' as const) }),
    fc.record({
      op: fc.constant('retain' as const),
      modulo: fc.integer({ min: 1, max: 4 }),
      rest: fc.integer({ min: 0, max: 3 }),
    }),
    fc.record({ op: fc.constant('bumpFirst' as const) }),
  ),
  { maxLength: 300 },
);

describe('Fifo', () => {
  it('behaves as a plain array used as a queue, across growth and wrap-around', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fifoOps, (capacity, ops) => {
        const fifo = new Fifo<{ v: number }>(capacity);
        const model: { v: number }[] = [];
        for (const step of ops as FifoOp[]) {
          switch (step.op) {
            case 'push': {
              const item = { v: step.value };
              fifo.push(item);
              model.push(item);
              break;
            }
            case 'shift':
              expect(fifo.shift()).toBe(model.shift());
              break;
            case 'peek':
              expect(fifo.peek()).toBe(model[0]);
              break;
            case 'retain': {
              const keep = (item: { v: number }) =>
                Math.abs(item.v % step.modulo) !== step.rest % step.modulo;
              fifo.retain(keep);
              model.splice(0, model.length, ...model.filter(keep));
              break;
            }
            case 'bumpFirst':
              // The backlog adds a dropped message's count to the one after it, in place.
              if (model[0]) {
                fifo.peek()!.v++;
                expect(fifo.peek()).toBe(model[0]);
              } else expect(fifo.peek()).toBeUndefined();
              break;
          }
          expect(fifo.length).toBe(model.length);
        }
        expect([...fifo]).toEqual(model);
      }),
      { numRuns: 300 },
    );
  });
});

/** The bookkeeping PassedSeqs replaces, as Delivery kept it: an array, shifted past `max`. */
class ArrayPassedSeqs {
  seqs: number[] | undefined;

  constructor(private readonly max: number) {}

  push(seq: number): void {
    const passed = (this.seqs ??= []);
    passed.push(seq);
    if (passed.length > this.max) passed.shift();
  }

  take(seq: number, lastSeq: number): number {
    // A seq passed by twice (live, and again from a replay's history) is one seq.
    const counted: number[] = [];
    const later: number[] = [];
    for (const passed of this.seqs ?? []) {
      if (passed > seq) later.push(passed);
      else if (passed < seq && !(passed <= lastSeq) && !counted.includes(passed)) {
        counted.push(passed);
      }
    }
    this.seqs = later.length > 0 ? later : undefined;
    return counted.length;
  }
}

describe('PassedSeqs', () => {
  it('counts and forgets as the array bookkeeping does, seqs in any order and twice, positions unknown too', () => {
    const op = fc.oneof(
      { arbitrary: fc.record({ push: fc.integer({ min: 0, max: 40 }) }), weight: 3 },
      fc.record({
        take: fc.integer({ min: 0, max: 40 }),
        lastSeq: fc.oneof(fc.integer({ min: 0, max: 40 }), fc.constant(Number.NaN)),
      }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.array(op, { maxLength: 200 }), (max, ops) => {
        const real = new PassedSeqs(max);
        const model = new ArrayPassedSeqs(max);
        for (const step of ops) {
          if ('push' in step) {
            real.push(step.push);
            model.push(step.push);
          } else {
            expect(real.take(step.take, step.lastSeq)).toBe(model.take(step.take, step.lastSeq));
          }
          expect(real.length).toBe(model.seqs?.length ?? 0);
        }
      }),
      { numRuns: 500 },
    );
  });
});

/** A socket that records the params of each frame. */
class Socket implements Sink {
  readonly frames: Record<string, unknown>[] = [];
  bufferedAmount = 0;

  send(frame: string | { bytes: Uint8Array }): void {
    const text = typeof frame === 'string' ? frame : new TextDecoder().decode(frame.bytes);
    this.frames.push((JSON.parse(text) as { params: Record<string, unknown> }).params);
  }

  close(): void {}

  onDrain(): () => void {
    return () => undefined;
  }
}

describe('a Delivery passed by more seqs than it keeps', () => {
  it('counts the forgotten oldest as a gap, then tells the position: no hole in silence', () => {
    const socket = new Socket();
    const delivery = new Delivery(
      socket,
      {
        head: notificationHead('subscription'),
        flow: { slowConsumer: 'drop', highWaterMark: 1 << 20 },
        onSlowConsumer: () => undefined,
      },
      '"0x1"',
    );
    delivery.resumable = true;
    delivery.pauseForReplay(0);
    const kept = 10_000; // Delivery's MAX_WAITING
    for (let seq = 1; seq <= kept + 3; seq++) delivery.pass(seq);
    delivery.offer(messageTail('"last"', kept + 4), undefined, kept + 4);
    delivery.resume(0, []);
    expect(socket.frames).toEqual([
      { subscription: '0x1', gap: 3 },
      { subscription: '0x1', seq: kept + 3 },
      { subscription: '0x1', seq: kept + 4, result: 'last' },
    ]);
  });
});

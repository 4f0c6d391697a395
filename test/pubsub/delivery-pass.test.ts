import { describe, expect, it } from 'vitest';
import { Delivery } from '../../src/pubsub/delivery.js';
import type { SlowConsumerPolicy } from '../../src/pubsub/delivery.js';
import { messageTail, notificationHead } from '../../src/pubsub/frames.js';
import type { Sink } from '../../src/pubsub/sink.js';

/** A socket whose buffered bytes the test sets, recording the params of each frame. */
class Socket implements Sink {
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
    notificationHead('subscription'),
    '"0x1"',
    { slowConsumer: policy, highWaterMark: 100 },
    () => undefined,
    'session-1',
  );
  delivery.resumable = true;
  const offer = (seq: number) => delivery.offer(messageTail(String(seq), seq), undefined, seq);
  return { socket, delivery, offer };
}

/** Each frame as `seq`, `missed` and `gap` only. */
const summary = (socket: Socket) =>
  socket.frames.map(({ seq, missed, gap }) => ({ seq, missed, gap }));

describe('a message passed by (published except the subscriber)', () => {
  it('is accounted for in line: the next message shows no hole', () => {
    const { socket, delivery, offer } = subscriber();
    delivery.sendPosition(0, undefined);
    offer(1);
    delivery.pass(2);
    delivery.pass(3);
    offer(4);
    expect(summary(socket).slice(1)).toEqual([
      { seq: 1, missed: undefined, gap: undefined },
      { seq: 4, missed: undefined, gap: undefined },
    ]);
  });

  it('during a replay: held live messages and passed ones follow the history without a gap', () => {
    const { socket, delivery, offer } = subscriber();
    delivery.pauseForReplay(0);
    offer(2);
    delivery.pass(3);
    offer(4);
    delivery.resume(0, [{ tail: messageTail('1', 1), seq: 1 }]);
    expect(summary(socket)).toEqual([
      { seq: 1, missed: undefined, gap: undefined },
      { seq: 2, missed: undefined, gap: undefined },
      { seq: 4, missed: undefined, gap: undefined },
    ]);
  });

  it('after a held message (keep-latest): neither a gap nor a passed seq counted as missed', () => {
    const { socket, delivery, offer } = subscriber('keep-latest');
    delivery.sendPosition(0, undefined);
    socket.bufferedAmount = 1_000;
    offer(1); // held
    delivery.pass(2);
    socket.drain(); // writes 1
    offer(3);
    expect(summary(socket).slice(1)).toEqual([
      { seq: 1, missed: undefined, gap: undefined },
      { seq: 3, missed: undefined, gap: undefined },
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
    expect(summary(socket).slice(1)).toEqual([{ seq: 3, missed: 1, gap: undefined }]);
  });
});

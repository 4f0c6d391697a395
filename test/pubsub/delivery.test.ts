import { describe, expect, it } from 'vitest';
import { Delivery } from '../../src/pubsub/delivery.js';
import type { FlowControl } from '../../src/pubsub/delivery.js';
import { messageTail, notificationHead } from '../../src/pubsub/frames.js';
import type { Sink } from '../../src/pubsub/sink.js';

/** A socket that writes everything at once (never above its high-water mark), recording frames. */
class RecordingSink implements Sink {
  readonly frames: Record<string, unknown>[] = [];
  closed: { code: number; reason: string } | undefined;
  readonly bufferedAmount = 0;

  send(frame: string | { bytes: Uint8Array }): void {
    const text = typeof frame === 'string' ? frame : new TextDecoder().decode(frame.bytes);
    this.frames.push((JSON.parse(text) as { params: Record<string, unknown> }).params);
  }

  close(code: number, reason: string): void {
    this.closed = { code, reason };
  }

  onDrain(): () => void {
    return () => undefined;
  }
}

const payload = JSON.stringify('x'.repeat(1_000)); // about 1 KB per message

/** 50 live messages (seq 11..60) arrive while history after seq 10 is being read. */
function replayWithBacklog(flow: FlowControl) {
  const sink = new RecordingSink();
  const dropped: string[] = [];
  const delivery = new Delivery(
    sink,
    {
      head: notificationHead('subscription'),
      flow,
      onSlowConsumer: (e) => dropped.push(e),
    },
    '"0x1"',
  );
  delivery.pauseForReplay(10);
  for (let seq = 11; seq <= 60; seq++) delivery.offer(messageTail(payload, seq), undefined, seq);
  return { sink, dropped, delivery };
}

describe('the live backlog held during a replay', () => {
  it("is bounded by the topic's highWaterMark: 'drop' keeps the newest and reports the rest as missed", () => {
    const { sink, dropped, delivery } = replayWithBacklog({
      slowConsumer: 'drop',
      highWaterMark: 10_000,
    });
    delivery.resume(0, []);
    // About 10 KB of the 50 KB held: the newest, the first of them carrying how many were lost.
    expect(sink.frames.length).toBeGreaterThan(0);
    expect(sink.frames.length).toBeLessThanOrEqual(10);
    const seqs = sink.frames.map((f) => f['seq'] as number);
    expect(seqs.at(-1)).toBe(60);
    expect(seqs).toEqual(seqs.map((_, i) => 61 - seqs.length + i));
    expect(sink.frames[0]!['missed']).toBe(50 - seqs.length);
    expect(sink.frames.slice(1).every((f) => f['missed'] === undefined)).toBe(true);
    expect(dropped).toHaveLength(50 - seqs.length);
  });

  it("'keep-latest': past the mark only the newest is kept, so what is delivered stays within it", () => {
    const { sink, delivery } = replayWithBacklog({
      slowConsumer: 'keep-latest',
      highWaterMark: 10_000,
    });
    delivery.resume(0, []);
    const seqs = sink.frames.map((f) => f['seq'] as number);
    expect(seqs.length).toBeLessThanOrEqual(10);
    expect(seqs.at(-1)).toBe(60);
    const missed = sink.frames.reduce((sum, f) => sum + ((f['missed'] as number) ?? 0), 0);
    expect(missed + seqs.length).toBe(50);
  });

  it("'disconnect' closes the connection with 1013 once the backlog passes the mark", () => {
    const { sink, dropped, delivery } = replayWithBacklog({
      slowConsumer: 'disconnect',
      highWaterMark: 10_000,
    });
    expect(sink.closed).toEqual({ code: 1013, reason: 'slow consumer' });
    expect(dropped).toEqual(['disconnected']);
    delivery.resume(0, []);
    expect(sink.frames).toEqual([]);
  });

  it('a backlog within the mark is delivered whole, after the replayed history', () => {
    const { sink, delivery } = replayWithBacklog({
      slowConsumer: 'drop',
      highWaterMark: 1024 * 1024,
    });
    // History had 11 too: its live copy is not sent twice.
    delivery.resume(0, [{ tail: messageTail('"from history"', 11), seq: 11 }]);
    expect(sink.frames.map((f) => f['seq'])).toEqual(Array.from({ length: 50 }, (_, i) => 11 + i));
    expect(sink.frames[0]!['result']).toBe('from history');
    expect(sink.frames.every((f) => f['missed'] === undefined)).toBe(true);
  });
});

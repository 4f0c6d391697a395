/**
 * What an HTTP streaming session's replay buffer holds in the heap: sseReplayBytes of kept
 * events (each counted as its text plus KEPT_EVENT_BYTES), and nothing of the events it has let
 * go, whatever their size or characters. Measured on transports without a stream, as a session
 * whose stream is away keeps its events.
 */
import { afterEach, expect, it } from 'vitest';
import { SseTransport } from '../../src/transport/sse-transport.js';
import { REPLAY_BYTES, replayLimits } from './replay-limits.js';
import { fullGc, heapUsedButCode } from '../support/heap.js';

const limits = replayLimits;

const made: SseTransport[] = [];
afterEach(() => {
  for (const transport of made.splice(0)) transport.close();
});

/**
 * Heap grown per transport by `sessions` transports each sent `events` texts made by `text`, once
 * the output turns have written what waited for them: the least of three rounds, since what else
 * the process allocates meanwhile only adds.
 */
async function heapPerSession(
  sessions: number,
  events: number,
  text: (i: number) => string,
): Promise<number> {
  const round = async (): Promise<number> => {
    for (const transport of made.splice(0)) transport.close();
    fullGc();
    const before = heapUsedButCode();
    for (let s = 0; s < sessions; s++) {
      const transport = new SseTransport(`s${s}`, 'secret', limits, counters(), () => undefined);
      made.push(transport);
      for (let i = 0; i < events; i++) transport.send(text(i));
    }
    await Promise.all(made.map((transport) => transport.outputWritten()));
    fullGc();
    return (heapUsedButCode() - before) / sessions;
  };
  return Math.min(await round(), await round(), await round());
}

function counters() {
  return { messagesIn: 0, messagesOut: 0 };
}

const reply = (result: string, id: number): string =>
  JSON.stringify({ jsonrpc: '2.0', result, id });

it('events let go hold no heap: 32 replies of nearly sseReplayBytes each', async () => {
  // Each one evicts the one before: one is kept.
  const held = await heapPerSession(2, 32, (i) => reply('a'.repeat(REPLAY_BYTES - 4096), i));
  expect(held).toBeLessThan(1.25 * REPLAY_BYTES);
});

it.each([
  ['ASCII', ''],
  // One character past U+00FF makes the heap hold the whole text at two bytes a character.
  ['ASCII and one €', '€'],
  ['Latin-1', 'é'.repeat(2000)],
  ['€ only', '€'.repeat(2000)],
])('kept events hold at most about sseReplayBytes of heap: %s', async (_name, extra) => {
  const held = await heapPerSession(4, 500, (i) =>
    reply(extra + 'a'.repeat(4000 - extra.length), i),
  );
  expect(held).toBeLessThan(1.25 * REPLAY_BYTES);
});

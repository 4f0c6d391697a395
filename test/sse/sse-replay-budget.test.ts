/**
 * An HTTP streaming session's replay buffer counts toward the node-wide output budget
 * (maxBufferedBytesTotal) with what its stream holds: each session may keep sseReplayBytes,
 * stream or no stream, and maxConnections sessions' worth is more than a process holds. Past the
 * budget, the sessions holding the most are shed, largest first, until the rest fit.
 */
import { afterEach, expect, it } from 'vitest';
import { OutputBudget } from '../../src/transport/output-budget.js';
import { SseTransport } from '../../src/transport/sse-transport.js';
import { REPLAY_BYTES, replayLimits } from './replay-limits.js';

const limits = replayLimits;

const made: SseTransport[] = [];
afterEach(() => {
  for (const transport of made.splice(0)) transport.close();
});

const reply = (result: string, id: number): string =>
  JSON.stringify({ jsonrpc: '2.0', result, id });

it('sessions keeping replies, with no stream, are counted and the largest shed past the budget', async () => {
  const shed: SseTransport[] = [];
  const budget = new OutputBudget<SseTransport>(
    2 * REPLAY_BYTES,
    () => made,
    (transport) => transport,
    (transport) => shed.push(transport),
  );
  // Four sessions keeping about 600, 700, 800 and 900 kB of replies: 3 MB in all.
  for (let s = 0; s < 4; s++) {
    const transport = new SseTransport(
      `s${s}`,
      'secret',
      limits,
      { messagesIn: 0, messagesOut: 0 },
      () => undefined,
    );
    transport.joinBudget(budget);
    made.push(transport);
    for (let i = 0; i < 6 + s; i++) transport.send(reply('a'.repeat(100_000), i));
  }
  expect(budget.bytes).toBeGreaterThan(3 * 600_000);
  await new Promise((resolve) => setImmediate(resolve)); // the budget's exact check
  // The largest first, until what is left fits in 2 MiB: 1.3 MB once the two largest are gone.
  expect(shed.map((transport) => transport.sessionId)).toEqual(['s3', 's2']);
  expect(budget.bytes).toBeLessThanOrEqual(2 * REPLAY_BYTES);
});

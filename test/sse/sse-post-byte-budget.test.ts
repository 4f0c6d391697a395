/**
 * An event stream's POSTs cost their address's HTTP byte budget (limits.bytesPerSecondPerIp,
 * shared with POST /rpc): past it a POST waits for the budget before its body is read, its 202
 * with it, in order behind the session's earlier POSTs, as a WebSocket's socket stops being read.
 * Nothing is refused or lost: every message is answered on the stream, in the order sent. The
 * budget is the one POST /rpc spends: once the stream's POSTs have spent it, a POST /rpc of the
 * address is refused 429.
 */
import { afterEach, expect, it } from 'vitest';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { openStream, post } from './sse-raw.js';

const running: RunningGateway[] = [];
afterEach(async () => {
  for (const gateway of running.splice(0)) await gateway.gateway.close({ timeoutMs: 1_000 });
});

it('POSTs past the byte budget wait their turn, every message answered in order; POST /rpc shares the budget', async () => {
  const gateway = await startGateway({
    routes: { events: '/rpc/events' },
    // 4 KiB/s, bursts of 2 × 4 KiB.
    limits: { maxMessageBytes: 4096, bytesPerSecondPerIp: 4 * 1024, ratePerSecond: 0 },
  });
  running.push(gateway);
  gateway.gateway.method('echo', (params) => (params as [number])[0]);
  const events = `${gateway.httpUrl}/rpc/events`;
  const stream = await openStream(events);
  const pad = 'x'.repeat(3000);
  const sent = Array.from({ length: 12 }, (_, i) =>
    post(
      events,
      stream.session,
      JSON.stringify({ jsonrpc: '2.0', id: i + 1, method: 'echo', params: [i + 1, pad] }),
    ),
  );
  // The first two fit the burst and the third takes it into debt; each of the rest is read once
  // that debt is paid, and takes it into debt again: some 28 KB, seven seconds of the budget.
  // Meanwhile a POST /rpc of the same address finds the budget spent: refused.
  await sent[3];
  const refused = await fetch(`${gateway.httpUrl}/rpc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'echo', params: [99, pad] }),
  });
  expect(refused.status).toBe(429);
  const statuses = await Promise.all(sent);
  expect(statuses.map((s) => s.status)).toEqual(Array(12).fill(202));
  const answered = (got: { data: string }[]) => got.filter((e) => e.data.includes('"result"'));
  const answers = await stream.until((got) => answered(got).length === 12, 30_000);
  const ids = answered(answers).map((e) => (JSON.parse(e.data) as { id: number }).id);
  expect(ids).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
  stream.destroy();
}, 60_000);

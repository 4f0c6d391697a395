/**
 * maxBufferedBytes on an event stream: a reply larger than the bound, to a client that reads,
 * is delivered (as on a WebSocket); a stream that holds more than the bound with nothing of it
 * leaving for STALL_LOOK_MS closes its session (1008, "not reading").
 */
import { afterEach, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/client.js';
import { sseSocket } from '../../src/client/sse-transport.js';
import { startGateway } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';
import { openRawStream, stalledStreamsGateway } from './stalled-streams.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it('a reply larger than maxBufferedBytes reaches a client that reads, and so do the messages after it', async () => {
  const { gateway, url } = await startGateway({
    routes: { events: '/rpc/events' },
    limits: { maxBufferedBytes: 256 * 1024 },
  });
  cleanups.push(() => gateway.close({ timeoutMs: 500 }));
  gateway.method('big', (params) => 'x'.repeat((params as number[])[0]!));
  const client = new RpcClient({ url, WebSocket: sseSocket(), reconnect: false, heartbeat: false });
  cleanups.push(() => client.close());
  await client.opened();
  // Two large replies written in one turn, then a small one: all of them arrive.
  const replies = await Promise.all([
    client.call('big', [1024 * 1024]),
    client.call('big', [300 * 1024]),
    client.call('big', [10]),
  ]);
  expect(replies.map((reply) => (reply as string).length)).toEqual([1024 * 1024, 300 * 1024, 10]);
  expect(gateway.sessions.size).toBe(1);
});

// The three at once: each waits out STALL_LOOK_MS twice on its own gateway.
it.concurrent.for(['none', 'ascii', 'non-ascii'] as const)(
  'a stream not read that holds more than maxBufferedBytes closes its session (1008), small messages still coming: %s',
  async (trickle, { expect, onTestFinished }) => {
    const running = await stalledStreamsGateway({ maxBufferedBytes: 64 * 1024 });
    onTestFinished(() => running.gateway.close({ timeoutMs: 1_000 }));
    const stream = await openRawStream(running.port, {}, { stall: true });
    onTestFinished(() => void stream.socket.destroy());
    await running.fillUntilQueued(stream.session.session, 128 * 1024);
    const [session] = [...running.gateway.sessions.values()];
    // Each write adds its chunk's framing to what the stream holds: no sign of reading. A
    // message of characters UTF-8 writes in three bytes each is no sign of it either: what the
    // stream holds is counted in the unit it was counted in as it was written.
    const small = trickle === 'non-ascii' ? '€'.repeat(200) : 1;
    const timer =
      trickle === 'none'
        ? undefined
        : setInterval(() => session!.isClosed || session!.notify('small', [small]), 100);
    onTestFinished(() => clearInterval(timer));
    const closed = await session!.closed;
    expect(closed).toMatchObject({ code: 1008, reason: 'not reading' });
    await waitUntil(() => running.gateway.sessions.size === 0, 'the session gone');
  },
);

it('what a stream not read holds is counted in bytes, as UTF-8 writes them', async () => {
  const running = await stalledStreamsGateway({ maxBufferedBytes: 0 });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  const stream = await openRawStream(running.port, {}, { stall: true });
  cleanups.push(() => stream.socket.destroy());
  await running.fillUntilQueued(stream.session.session, 128 * 1024);
  const transport = running.transportOf(stream.session.session)!;
  const before = transport.budgetBytes;
  const [session] = [...running.gateway.sessions.values()];
  // 100 000 characters, 300 000 bytes of UTF-8.
  session!.notify('euros', ['€'.repeat(100_000)]);
  expect(transport.budgetBytes - before).toBeGreaterThanOrEqual(300_000);
});

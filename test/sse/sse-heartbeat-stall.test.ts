/**
 * The event stream's heartbeat comments are held to the stream's bound as events are: a reader
 * that never reads, sent nothing but heartbeats once its socket's kernel buffers are full, is
 * closed 1008 (`not reading`) by the stream's stall rule (more than maxBufferedBytes with
 * nothing leaving for STALL_LOOK_MS, at once past STALL_FACTOR times it), not left to queue
 * comments in the gateway for as long as it stays. The transport runs on a real HTTP server
 * with a heartbeat every millisecond (the gateway's is 15 s) and a small bound.
 */
import { connect } from 'node:net';
import { createServer } from 'node:http';
import type { ServerResponse } from 'node:http';
import { afterEach, expect, it } from 'vitest';
import { listenOnLoopback } from '../support/network.js';
import { STALL_FACTOR, SseTransport } from '../../src/transport/sse-transport.js';
import { waitUntil, within } from '../support/waiting.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const BOUND = 1024;

it('a stream not read, sent only heartbeats past its bound, is closed 1008 (not reading)', async () => {
  let opened!: (opened: { transport: SseTransport; res: ServerResponse }) => void;
  const stream = new Promise<{ transport: SseTransport; res: ServerResponse }>(
    (resolve) => (opened = resolve),
  );
  const server = createServer((_req, res) => {
    const transport = new SseTransport(
      'id',
      'secret',
      {
        replayBytes: 1 << 20,
        replayMs: 60_000,
        graceMs: 60_000,
        maxBufferedBytes: BOUND,
        heartbeatMs: 1,
      },
      { messagesIn: 0, messagesOut: 0 },
      () => undefined,
    );
    transport.attach(res, undefined);
    opened({ transport, res });
  });
  const listening = await listenOnLoopback(server);
  cleanups.push(listening.close);
  let closedWith: { code: number; reason: string } | undefined;
  // A client that sends its request and never reads a byte.
  const client = connect({ port: listening.port, host: '127.0.0.1' });
  client.on('error', () => undefined);
  client.pause();
  cleanups.push(() => client.destroy());
  client.write('GET /rpc/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  const { transport, res } = await within(stream, 'the stream opened');
  transport.listen({
    receive: () => undefined,
    transportClosed: (code, reason) => (closedWith = { code, reason }),
  });

  // Events until the kernel's buffers are full and the stream itself holds some of the last,
  // within the bound: from here on only heartbeats are written.
  const event = 'e'.repeat(BOUND / 2);
  for (let i = 0; res.writableLength === 0; i++) {
    if (i > 100_000) throw new Error('the kernel took everything');
    transport.send(event);
    await new Promise((resolve) => setImmediate(resolve));
  }
  expect(res.writableLength).toBeLessThanOrEqual(BOUND);
  expect(transport.isClosed).toBe(false);

  // The heartbeats alone take the stream past its bound, then past STALL_FACTOR times it.
  await waitUntil(
    () => transport.isClosed || res.writableLength > (STALL_FACTOR + 1) * BOUND,
    'the stream closed, or holding more than STALL_FACTOR + 1 times its bound',
    60_000,
  );
  expect({ closed: transport.isClosed, code: transport.closeCode }).toEqual({
    closed: true,
    code: 1008,
  });
  await waitUntil(() => closedWith !== undefined, 'the session told of the close');
  expect(closedWith).toEqual({ code: 1008, reason: 'not reading' });
}, 90_000);

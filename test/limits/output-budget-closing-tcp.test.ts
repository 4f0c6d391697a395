/**
 * A TCP connection that is closing still counts what it queued in the node's output budget
 * (limits.maxBufferedBytesTotal) until its peer has read it. A peer that sends its calls,
 * half-closes and never reads has its connection closed once the calls are answered, and the
 * replies then wait for it until limits.endOfInputDeadlineMs: uncounted, connections that each
 * stay under the budget could together hold any multiple of it. Over the budget, the closing
 * connections holding the most are cut at once.
 */
import { connect } from 'node:net';
import type { Server } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { waitFor } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const BUDGET = 16 * 1024 * 1024;
const REPLY_BYTES = 512 * 1024;
/** 16 MiB of replies per connection: what the kernel's buffers do not take stays queued. */
const CALLS = 32;
const PEERS = 3;

it('half-closed TCP peers that do not read: their replies count while their connections close, and over the budget they are cut', async () => {
  const { gateway } = await res.gateway({
    heartbeatIntervalMs: 0,
    limits: {
      maxBufferedBytesTotal: BUDGET,
      // Every reply queued without pausing reading: the input ends, and the connection closes.
      maxBufferedBytes: 256 * 1024 * 1024,
      // Far past this test's waits: only the budget can let the replies go in time.
      endOfInputDeadlineMs: 600_000,
      ratePerSecond: 0,
      bytesPerSecondPerIp: 0,
      maxConnectionsPerIp: 100,
    },
  });
  gateway.method('big', () => 'x'.repeat(REPLY_BYTES));
  const { port } = await gateway.listenTcp(0, '127.0.0.1');
  // The node's side of the connections (the clients see nothing while they do not read).
  const [server] = (gateway as unknown as { intake: { tcpServers: Set<Server> } }).intake
    .tcpServers;
  const connections = (): Promise<number> =>
    new Promise((resolve, reject) =>
      server!.getConnections((err, count) => (err ? reject(err) : resolve(count))),
    );
  const lines = Array.from({ length: CALLS }, (_, i) =>
    JSON.stringify({ jsonrpc: '2.0', method: 'big', id: i }),
  );
  for (let i = 0; i < PEERS; i++) {
    const socket = connect(port, '127.0.0.1');
    res.netSockets.push(socket);
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.pause(); // never reads
    socket.end(`${lines.join('\n')}\n`);
    // Answered, its input ended: the session closes, its replies still queued.
    await waitFor(() => gateway.sessions.size === 0, `session ${i} closed`);
  }
  // Three closing connections with more than the budget queued between them: some are cut.
  await waitFor(async () => (await connections()) < PEERS, 'a connection over the budget cut');
  expect(await connections()).toBeLessThan(PEERS);
});

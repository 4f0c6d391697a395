/**
 * limits.bytesPerSecond and bytesPerSecondPerIp on TCP (NDJSON): a connection's lines cost its
 * input budget as a WebSocket's messages do (their UTF-8 bytes, at least messageCostBytes), and
 * past it the socket is paused until the budget refills. Nothing it sent is lost or refused:
 * every line is answered, in order. Without it, one address's TCP lines could ask the event loop
 * to parse as fast as it could read them.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { createGateway } from '../../src/server/gateway.js';
import { silentLogger } from '../../src/peer/logger.js';
import { waitUntil } from '../support/waiting.js';
import { watchTcpPauses } from './tcp-pauses.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const LINES = 40;
const PAD = 'x'.repeat(2048);

it.each([
  ['bytesPerSecond', { bytesPerSecond: 32 * 1024, bytesPerSecondPerIp: 0 }],
  ['bytesPerSecondPerIp', { bytesPerSecond: 0, bytesPerSecondPerIp: 32 * 1024 }],
])(
  'a TCP connection past %s is paused, and every line it sent is answered in order',
  async (_name, budget) => {
    const gateway = createGateway({
      logger: silentLogger,
      heartbeatIntervalMs: 0,
      // The burst is 2 × maxMessageBytes: 8 KiB, about four lines of these.
      limits: { maxMessageBytes: 4096, ratePerSecond: 0, ...budget },
    });
    cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
    gateway.method('echo', (params) => (params as [number, string])[0]);
    const { port } = await gateway.listenTcp(0, '127.0.0.1');

    const socket: Socket = connect(port, '127.0.0.1');
    cleanups.push(() => socket.destroy());
    await new Promise((resolve) => socket.once('connect', resolve));
    const pauses = await watchTcpPauses(gateway);

    let text = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
    // 80 KiB at once: ten times the burst.
    for (let i = 1; i <= LINES; i++) {
      socket.write(
        `${JSON.stringify({ jsonrpc: '2.0', id: i, method: 'echo', params: [i, PAD] })}\n`,
      );
    }
    await waitUntil(() => text.split('\n').length > LINES, 'every reply', 30_000);
    const ids = text
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { result: number }).result);
    expect(ids).toEqual(Array.from({ length: LINES }, (_, i) => i + 1));
    expect(pauses.count()).toBeGreaterThan(0);
  },
  60_000,
);

/**
 * A TCP (NDJSON) line past maxMessageBytes closes its connection (-32600 "Message too large",
 * then the close), and what was read of it is charged to the address's input budget
 * (`bytesPerSecondPerIp`) as lines that fit are: otherwise an address could have the gateway
 * read a whole maxMessageBytes per connection, connection after connection, never paused. Here
 * three such lines (each over half the address's burst) leave the address owing, so the next
 * connection from it is paused at its first line, and that line is still answered.
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

const MAX = 4096;

async function open(port: number): Promise<{ socket: Socket; text: () => string }> {
  const socket = connect(port, '127.0.0.1');
  cleanups.push(() => socket.destroy());
  await new Promise((resolve) => socket.once('connect', resolve));
  let text = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  return { socket, text: () => text };
}

it('a line too large costs the address its bytes: the next connection is paused', async () => {
  const gateway = createGateway({
    logger: silentLogger,
    heartbeatIntervalMs: 0,
    // The address's burst is 2 × maxMessageBytes (8 KiB), refilled at 512 bytes a second.
    limits: {
      maxMessageBytes: MAX,
      ratePerSecond: 0,
      bytesPerSecond: 0,
      bytesPerSecondPerIp: 512,
    },
  });
  cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
  gateway.method('echo', (params) => (params as [number])[0]);
  const { port } = await gateway.listenTcp(0, '127.0.0.1');

  for (let i = 0; i < 3; i++) {
    const { socket, text } = await open(port);
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'x', params: ['a'.repeat(MAX)] })}\n`);
    await closed;
    expect(text()).toContain('"message":"Message too large"');
  }

  const { socket, text } = await open(port);
  const pauses = await watchTcpPauses(gateway);
  socket.write(`${JSON.stringify({ jsonrpc: '2.0', id: 'after', method: 'echo', params: [7] })}\n`);
  await waitUntil(() => text().includes('"id":"after"'), 'the line answered', 60_000);
  expect(pauses.count()).toBeGreaterThan(0);
}, 90_000);

/**
 * A gateway that takes connections only through serveStream is a node like any other: what
 * other nodes send its sessions (notifySession, revokeSession) reaches them, without it ever
 * calling listen() or listenTcp().
 */
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createGateway } from '../../src/index.js';
import type { Gateway } from '../../src/index.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { silentLogger } from '../../src/peer/logger.js';
import { waitFor } from '../support/waiting.js';

const gateways: Gateway[] = [];
afterEach(async () => {
  await Promise.all(gateways.splice(0).map((gateway) => gateway.close({ timeoutMs: 1_000 })));
});

function gatewayOn(broker: MemoryBroker): Gateway {
  const gateway = createGateway({ broker, logger: silentLogger, heartbeatIntervalMs: 0 });
  gateways.push(gateway);
  return gateway;
}

/** A session served over a pair of streams; the lines it writes, and whether its output ended. */
async function streamSession(gateway: Gateway) {
  const input = new PassThrough();
  const output = new PassThrough();
  const lines: string[] = [];
  let buffered = '';
  let ended = false;
  output.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const parts = buffered.split('\n');
    buffered = parts.pop()!;
    lines.push(...parts.filter((line) => line !== ''));
  });
  output.on('end', () => (ended = true));
  output.on('close', () => (ended = true));
  const session = await gateway.serveStream(input, output);
  return { session, lines, ended: () => ended };
}

describe('a gateway serving streams only', () => {
  it('gets what other nodes send its sessions', async () => {
    const broker = new MemoryBroker();
    const served = gatewayOn(broker);
    const other = gatewayOn(broker);
    await other.listen(0);
    const { session, lines, ended } = await streamSession(served);

    expect(await other.notifySession(session.id, 'hello', ['from the other node'])).toBe(true);
    await waitFor(() => lines.some((line) => line.includes('"hello"')), 'the notification');
    expect(JSON.parse(lines.find((line) => line.includes('"hello"'))!)).toEqual({
      jsonrpc: '2.0',
      method: 'hello',
      params: ['from the other node'],
    });

    expect(await other.revokeSession(session.id, { reason: 'bye' })).toBe(true);
    await waitFor(() => session.isClosed, 'the session closed');
    await waitFor(ended, 'its output ended');
  });
});

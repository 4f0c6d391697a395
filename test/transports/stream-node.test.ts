/**
 * A gateway that takes connections only through serveStream is a node like any other: what
 * other nodes send its sessions (notifySession, revokeSession) reaches them, without it ever
 * calling listen() or listenTcp(). And its streams are taken at once, whatever the broker takes
 * to answer the node's own subscriptions: an error on them meanwhile is handled, not thrown.
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

/** A MemoryBroker whose subscribes answer only after `delayMs`. */
class SlowBroker extends MemoryBroker {
  constructor(private readonly delayMs: number) {
    super();
  }
  override async subscribe(...args: Parameters<MemoryBroker['subscribe']>): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    return super.subscribe(...args);
  }
}

describe('a stream served while the broker is slow to answer', () => {
  it('is taken at once: an error on it meanwhile ends the session, not the process', async () => {
    const served = gatewayOn(new SlowBroker(200));
    const input = new PassThrough();
    const output = new PassThrough();
    const serving = served.serveStream(input, output).then(
      (session) => session,
      () => undefined,
    );
    // Before the broker has answered: an unlistened error here would be uncaught.
    await new Promise((resolve) => setTimeout(resolve, 20));
    input.destroy(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }));
    output.destroy(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
    const session = await serving;
    if (session) await waitFor(() => session.isClosed, 'the session closed');
  });
});

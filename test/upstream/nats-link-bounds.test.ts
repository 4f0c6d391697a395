/**
 * A NATS upstream over a link that stalls or drops. The NATS client queues what is published
 * and never pushes back, so a request keeps its slot until the server has it (a flush): over a
 * stalled link at most `maxConcurrent` requests wait in the client, and one more is refused at
 * once (-32013), notifications and calls given up alike; once the link moves, the slots come
 * back. While the client is disconnected (reconnecting) a request is refused at once as not
 * sent (-32011 `not connected`, which retries apply to), not published into a queue the client
 * throws away; once the link is back, calls are answered. A TCP relay in front of the real NATS server
 * stalls (holds what the client sends) and drops (cuts) the link.
 */
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { nanoid } from 'nanoid';
import { afterEach, describe, expect, it } from 'vitest';
import { NatsUpstreamClient } from '../../src/upstream/index.js';
import type { UpstreamError } from '../../src/upstream/index.js';
import { NATS_URL } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { waitFor } from '../support/waiting.js';

const mustRun = process.env['CI'] === 'true';
const natsUp = await canConnect(4222);
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

/** A responder on a subject of its own, a relay to NATS, and an upstream client through it. */
async function throughRelay(options: { retries?: number } = {}) {
  const subject = `test.link.${nanoid(8)}`;
  const responder: NatsConnection = await connect({ servers: NATS_URL });
  cleanups.push(() => responder.close());
  const heard: string[] = [];
  responder.subscribe(subject, {
    callback: (_err, msg) => {
      const request = msg.json<{ id?: number; method: string }>();
      heard.push(request.method);
      if (request.id !== undefined) {
        msg.respond(JSON.stringify({ jsonrpc: '2.0', id: request.id, result: request.method }));
      }
    },
  });
  await responder.flush();
  const relay = new TcpRelay(4222);
  const port = await relay.start();
  cleanups.push(() => relay.cut());
  const client = new NatsUpstreamClient({
    name: 'orders',
    servers: [`nats://127.0.0.1:${port}`],
    subject,
    maxConcurrent: 2,
    maxReplyBytes: 1 << 20,
    retries: options.retries ?? 0,
  });
  cleanups.push(() => client.close());
  await client.connect();
  return { client, relay, heard };
}

const callOptions = { timeoutMs: 300, idempotent: true };
const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => 'ok',
    (err: UpstreamError) => `${err.code} ${err.reason}`,
  );

describe.skipIf(!natsUp && !mustRun)('a NATS upstream over a link that stalls or drops', () => {
  it('a stalled link holds at most maxConcurrent requests; one more is refused at once', async () => {
    const { client, relay, heard } = await throughRelay();
    relay.hold();
    // Two notifications published into the stalled link keep their slots until flushed.
    await client.notify('orders.a', {}, callOptions);
    await client.notify('orders.b', {}, callOptions);
    expect(client.inFlight).toBe(2);
    expect(await codeOf(client.notify('orders.c', {}, callOptions))).toMatch(/^-32013 /);
    expect(await codeOf(client.call('orders.d', {}, callOptions))).toMatch(/^-32013 /);
    relay.release();
    await waitFor(() => client.inFlight === 0, 'the slots back once the link moves');
    expect(await codeOf(client.call('orders.e', {}, callOptions))).toBe('ok');
    expect(heard).toEqual(['orders.a', 'orders.b', 'orders.e']);
  });

  it('a call given up over a stalled link keeps its slot until the server has it', async () => {
    const { client, relay } = await throughRelay();
    relay.hold();
    expect(await codeOf(client.call('orders.slow', {}, callOptions))).toMatch(/^-32012 /);
    expect(client.inFlight).toBe(1);
    relay.release();
    await waitFor(() => client.inFlight === 0, 'the slot back once flushed');
  });

  it('while disconnected, a request is refused at once as not sent; once back, calls are answered', async () => {
    const { client, relay } = await throughRelay({ retries: 1 });
    await relay.cut();
    // Once the client has seen the loss (a call made before that times out, its slot let go).
    await waitFor(
      async () =>
        (await codeOf(client.call('orders.x', {}, { timeoutMs: 200 }))).includes('not connected'),
      'a call refused as not connected',
    );
    // Refused at once, not after its timeout of 30 s.
    expect(await codeOf(client.call('orders.x', {}, { timeoutMs: 30_000 }))).toMatch(
      /^-32011 .*not connected/,
    );
    expect(await codeOf(client.notify('orders.n', {}, { timeoutMs: 30_000 }))).toMatch(
      /^-32011 .*not connected/,
    );
    await relay.restore();
    await waitFor(
      async () => (await codeOf(client.call('orders.y', {}, { timeoutMs: 2_000 }))) === 'ok',
      'calls answered once the link is back',
    );
  });
});

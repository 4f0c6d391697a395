// A NATS call given up (rpc.cancel, its timeout) is answered at once, but its request stays
// pending in the NATS client until the reply or NATS's own timeout: the call keeps its
// maxConcurrent slot until then, so giving calls up cannot make the gateway hold more pending
// NATS requests than maxConcurrent.
import { connect } from '@nats-io/transport-node';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { nanoid } from 'nanoid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NATS_URL } from '../support/brokers.js';
import { inCi } from '../support/environment.js';
import { canConnect } from '../support/network.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitFor } from '../support/waiting.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

const natsUp = await canConnect(4222);
const subject = `test.upstream.kept.${nanoid(8)}`;

describe.skipIf(!natsUp && !inCi)('a NATS call given up', () => {
  let responder: NatsConnection;
  let running: RoutedGateway;
  /** Requests the responder holds unanswered, until the test answers them. */
  const held: Msg[] = [];

  beforeAll(async () => {
    responder = await connect({ servers: NATS_URL });
    const subscription = responder.subscribe(subject);
    void (async () => {
      for await (const msg of subscription) held.push(msg);
    })();
    running = await startRoutedGateway({
      upstreams: {
        orders: {
          nats: { url: NATS_URL, subject },
          maxConcurrent: 1,
          maxConcurrentPerSession: 1,
          timeoutMs: 60_000,
        },
      },
      methods: { 'orders.*': 'orders' },
    });
    await running.routes.ready;
  });

  afterAll(async () => {
    await running?.close();
    await responder?.close();
  });

  const endpoint = () => running.routes.upstreams.get('orders')!;

  /** Answer every held request. */
  function answerHeld(): void {
    for (const msg of held.splice(0)) {
      const { id } = msg.json<{ id: number }>();
      msg.respond(JSON.stringify({ jsonrpc: '2.0', id, result: 'late' }));
    }
  }

  it('keeps its slot while its request is pending: another call is refused -32013 until the reply comes', async () => {
    const alice = await RawRpc.open(`${running.url}?user=alice`);
    const bob = await RawRpc.open(`${running.url}?user=bob`);
    try {
      alice.send({ jsonrpc: '2.0', id: 1, method: 'orders.get' });
      await waitFor(() => held.length === 1, 'the request to reach the responder');
      alice.send({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id: 1 } });
      expect((await alice.response(1)).error?.code).toBe(-32001);

      const refused = await bob.request('orders.get');
      expect(refused.error).toMatchObject({
        code: -32013,
        data: { upstream: 'orders', bound: 'maxConcurrent', limit: 1 },
      });
      expect(endpoint().inFlight).toBe(1);

      // The reply settles the pending request: the slot is free again.
      answerHeld();
      await waitFor(() => endpoint().inFlight === 0, 'the pending request to be let go');
      const answered = bob.request('orders.get');
      await waitFor(() => held.length === 1, "bob's request to reach the responder");
      answerHeld();
      expect((await answered).result).toBe('late');
    } finally {
      await alice.close();
      await bob.close();
    }
  });
});

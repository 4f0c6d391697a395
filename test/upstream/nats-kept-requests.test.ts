// A NATS call given up (rpc.cancel, its timeout) is answered at once and its reply inbox is
// unsubscribed then: the NATS client holds the request no more, so the call's maxConcurrent slot
// is free at once, and giving calls up cannot make the gateway hold more pending NATS requests
// than maxConcurrent. The late reply reaches no one: it is never taken for the next call's.
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

  /** Answer every held request with `result`. */
  function answerHeld(result: string): void {
    for (const msg of held.splice(0)) {
      const { id } = msg.json<{ id: number }>();
      msg.respond(JSON.stringify({ jsonrpc: '2.0', id, result }));
    }
  }

  it('lets go of its request at once: the next call gets the slot, and a late reply is not taken for it', async () => {
    const alice = await RawRpc.open(`${running.url}?user=alice`);
    const bob = await RawRpc.open(`${running.url}?user=bob`);
    try {
      alice.send({ jsonrpc: '2.0', id: 1, method: 'orders.get' });
      await waitFor(() => held.length === 1, 'the request to reach the responder');
      const given = held[0]!;
      alice.send({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id: 1 } });
      expect((await alice.response(1)).error?.code).toBe(-32001);
      await waitFor(() => endpoint().inFlight === 0, 'the cancelled request to be let go');

      const answered = bob.request('orders.get');
      await waitFor(() => held.length === 2, "bob's request to reach the responder");
      expect(held[1]!.reply).not.toBe(given.reply);
      // Alice's reply, late, with the id of bob's request: nobody listens on her inbox any more.
      const { id } = held[1]!.json<{ id: number }>();
      given.respond(JSON.stringify({ jsonrpc: '2.0', id, result: 'late' }));
      held.splice(0, 1);
      answerHeld('bob');
      expect((await answered).result).toBe('bob');
    } finally {
      await alice.close();
      await bob.close();
    }
  });
});

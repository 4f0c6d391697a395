// A notification routed to a NATS upstream and given up before it could be sent (its timeout
// passed while the upstream's first connection was still being made) is not sent once the
// connection is up: the gateway counted and logged it as timed out, and the upstream must not
// get what the gateway reported as failed. NATS keeps one connection's messages in order, so a
// call sent after it and answered shows whether the notification went first.
import { connect } from '@nats-io/transport-node';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { nanoid } from 'nanoid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NATS_URL } from '../support/brokers.js';
import { inCi } from '../support/environment.js';
import { canConnect } from '../support/network.js';
import { RawRpc } from '../support/raw-rpc.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

const natsUp = await canConnect(4222);
const subject = `test.upstream.given-up.${nanoid(8)}`;
const TIMEOUT_MS = 200;

describe.skipIf(!natsUp && !inCi)(
  'a NATS notification given up before its connection was made',
  () => {
    let responder: NatsConnection;
    let running: RoutedGateway;
    let relay: TcpRelay;
    const got: Msg[] = [];

    beforeAll(async () => {
      responder = await connect({ servers: NATS_URL });
      const subscription = responder.subscribe(subject);
      void (async () => {
        for await (const msg of subscription) {
          got.push(msg);
          const { id } = msg.json<{ id?: number }>();
          if (id !== undefined) msg.respond(JSON.stringify({ jsonrpc: '2.0', id, result: 'ok' }));
        }
      })();
      relay = new TcpRelay(Number(new URL(NATS_URL).port));
      const port = await relay.start();
      // The gateway's first connection to NATS hangs in its handshake until released.
      relay.hold();
      running = await startRoutedGateway({
        upstreams: {
          orders: { nats: { url: `nats://127.0.0.1:${port}`, subject }, timeoutMs: TIMEOUT_MS },
        },
        methods: { 'orders.*': 'orders' },
      });
    });

    afterAll(async () => {
      await running?.close();
      await responder?.close();
      await relay?.cut();
    });

    it('is not sent once the connection is up', async () => {
      const client = await RawRpc.open(`${running.url}?user=alice`);
      try {
        client.send({ jsonrpc: '2.0', method: 'orders.note', params: { n: 1 } });
        // A call sent after it times out after it: by then the notification was given up too.
        expect((await client.request('orders.first')).error?.code).toBe(-32012);
        relay.release();
        expect((await client.request('orders.second')).result).toBe('ok');
        expect(got.map((msg) => msg.json<{ method: string }>().method)).toEqual(['orders.second']);
      } finally {
        await client.close();
      }
    });
  },
);

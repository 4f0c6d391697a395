// An idempotent NATS call that times out is sent again, whatever its timeoutMs: the timed-out
// attempt's reply inbox is unsubscribed at the timeout, so the NATS client lets go of it at once and
// the retry goes out. When the retry reaches the responder, nobody listens on the first attempt's
// inbox any more: the call never holds two requests at once.
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
const subject = `test.upstream.retry.${nanoid(8)}`;

/** Each call's attempts as the responder got them, by x-request-id. */
const attempts = new Map<string, Msg[]>();
/** Per call: whether the previous attempt's inbox still had a listener when the next arrived. */
const previousStillListening = new Map<string, Promise<boolean>>();

/** True when someone still listens on `inbox`: a request to it is not refused for no responders. */
async function listened(responder: NatsConnection, inbox: string): Promise<boolean> {
  try {
    await responder.request(inbox, '{}', { timeout: 5_000 });
    return true;
  } catch (err) {
    const text = err instanceof Error ? `${err.message} ${String(err.cause)}` : String(err);
    return !/no responders/i.test(text);
  }
}

describe.skipIf(!natsUp && !inCi)('an idempotent NATS call that times out', () => {
  let responder: NatsConnection;
  let running: RoutedGateway;

  beforeAll(async () => {
    responder = await connect({ servers: NATS_URL });
    // `flaky` answers a call's second attempt only; `silent` never answers.
    const subscription = responder.subscribe(`${subject}.>`);
    void (async () => {
      for await (const msg of subscription) {
        const key = msg.headers!.get('x-request-id');
        const seen = attempts.get(key) ?? [];
        const previous = seen.at(-1);
        seen.push(msg);
        attempts.set(key, seen);
        if (previous) previousStillListening.set(key, listened(responder, previous.reply!));
        if (msg.subject.endsWith('.flaky') && seen.length === 2) {
          const { id } = msg.json<{ id: number }>();
          msg.respond(JSON.stringify({ jsonrpc: '2.0', id, result: 'second attempt' }));
        }
      }
    })();
    running = await startRoutedGateway({
      upstreams: {
        orders: { nats: { url: NATS_URL, subject: `${subject}.flaky` }, retries: 1 },
        silent: { nats: { url: NATS_URL, subject: `${subject}.silent` }, retries: 1 },
      },
      methods: {
        'orders.*': { upstream: 'orders', timeoutMs: 300, idempotent: true },
        'silent.*': { upstream: 'silent', timeoutMs: 300, idempotent: true },
      },
    });
    await running.routes.ready;
  });

  afterAll(async () => {
    await running?.close();
    await responder?.close();
  });

  /** The one call's attempts the responder got (each test makes one call per upstream). */
  function attemptsTo(upstream: 'flaky' | 'silent'): [string, Msg[]] {
    const calls = [...attempts].filter(([, seen]) => seen[0]!.subject.endsWith(`.${upstream}`));
    expect(calls).toHaveLength(1);
    return calls[0]!;
  }

  it('is sent again once the first attempt times out, and the retry is answered', async () => {
    const client = await RawRpc.open(`${running.url}?user=ana`);
    try {
      const reply = await client.request('orders.get');
      expect(reply.error).toBeUndefined();
      expect(reply.result).toBe('second attempt');
      const [key, seen] = attemptsTo('flaky');
      expect(seen).toHaveLength(2);
      expect(await previousStillListening.get(key)).toBe(false);
      expect(running.routes.upstreams.get('orders')!.inFlight).toBe(0);
    } finally {
      await client.close();
    }
  });

  it('fails -32012 after retries + 1 attempts, one request at a time', async () => {
    const client = await RawRpc.open(`${running.url}?user=ben`);
    try {
      const reply = await client.request('silent.get');
      expect(reply.error).toMatchObject({ code: -32012, data: { upstream: 'silent' } });
      const [key, seen] = attemptsTo('silent');
      expect(seen).toHaveLength(2);
      expect(await previousStillListening.get(key)).toBe(false);
      const endpoint = running.routes.upstreams.get('silent')!;
      await waitFor(() => endpoint.inFlight === 0, 'the call to let go of its slot');
    } finally {
      await client.close();
    }
  });
});

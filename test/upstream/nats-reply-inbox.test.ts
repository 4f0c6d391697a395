// Every NATS call lets go of its reply inbox, whatever its end: answered, timed out, given up, or
// its request refused by the NATS client before it left (a payload past the server's
// max_payload). A subscription left behind would be held for good, one per such call, on the
// gateway's connection and on the server.
import { connect } from '@nats-io/transport-node';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import fc from 'fast-check';
import { nanoid } from 'nanoid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsUpstreamClient, UpstreamError } from '../../src/upstream/index.js';
import { NATS_URL } from '../support/brokers.js';
import { inCi } from '../support/environment.js';
import { canConnect } from '../support/network.js';
import { waitFor } from '../support/waiting.js';

const natsUp = await canConnect(4222);
const subject = `test.upstream.inbox.${nanoid(8)}`;

/** How a call ends. */
type Outcome = 'publish-throws' | 'answered' | 'timed-out' | 'aborted';

/** The subscriptions the NATS client of `endpoint` holds (its own bookkeeping). */
async function subscriptionsOf(endpoint: NatsUpstreamClient): Promise<number> {
  const { connection } = await endpoint.connect();
  const { protocol } = connection as unknown as { protocol: { subscriptions: { size(): number } } };
  return protocol.subscriptions.size();
}

describe.skipIf(!natsUp && !inCi)("a NATS call's reply inbox", () => {
  let responder: NatsConnection;
  let endpoint: NatsUpstreamClient;
  /** Requests the responder received for the `silent` method, never answered. */
  const silent: Msg[] = [];
  let maxPayload: number;

  beforeAll(async () => {
    responder = await connect({ servers: NATS_URL });
    responder.subscribe(subject, {
      callback: (_err, msg) => {
        const request = msg.json<{ id?: number; method: string }>();
        if (request.method === 'silent') silent.push(msg);
        else msg.respond(JSON.stringify({ jsonrpc: '2.0', id: request.id, result: 'ok' }));
      },
    });
    await responder.flush();
    endpoint = new NatsUpstreamClient({
      name: 'inbox',
      servers: [NATS_URL],
      subject,
      maxConcurrent: 64,
      maxConcurrentPerSession: 64,
      retries: 0,
      maxReplyBytes: 1024 * 1024,
    });
    const { connection } = await endpoint.connect();
    maxPayload = connection.info!.max_payload;
  });

  afterAll(async () => {
    await endpoint?.close();
    await responder?.close();
  });

  /** One call ending as `outcome`; resolves with what it settled with. */
  async function callEnding(outcome: Outcome): Promise<unknown> {
    const options = { timeoutMs: 60_000, headers: {} };
    switch (outcome) {
      case 'publish-throws':
        return endpoint
          .call('answer', { big: 'x'.repeat(maxPayload) }, options)
          .catch((err: unknown) => err);
      case 'answered':
        return endpoint.call('answer', {}, options);
      case 'timed-out':
        // The responder never answers: the timeout's length does not matter.
        return endpoint
          .call('silent', {}, { ...options, timeoutMs: 50 })
          .catch((err: unknown) => err);
      case 'aborted': {
        const cancel = new AbortController();
        const before = silent.length;
        const call = endpoint
          .call('silent', {}, { ...options, signal: cancel.signal })
          .catch((err: unknown) => err);
        await waitFor(() => silent.length > before, 'the request to reach the responder');
        cancel.abort(new Error('given up'));
        return call;
      }
    }
  }

  it('is let go when the NATS client refuses the request as too large: -32011, no subscription left', async () => {
    const before = await subscriptionsOf(endpoint);
    for (let i = 0; i < 3; i++) {
      const failure = await callEnding('publish-throws');
      expect(failure).toBeInstanceOf(UpstreamError);
      expect(failure).toMatchObject({ code: -32011, reason: 'request failed' });
    }
    expect(endpoint.inFlight).toBe(0);
    expect(await subscriptionsOf(endpoint)).toBe(before);
    expect(await endpoint.call('answer', {}, { timeoutMs: 60_000 })).toBe('ok');
  });

  it('is let go on every path: for any calls, answered, timed out, given up or refused, none is left', async () => {
    // The endpoint's connection holds none of its own: each subscription it holds is a call's.
    expect(await subscriptionsOf(endpoint)).toBe(0);
    const outcomes = fc.array(
      fc.constantFrom<Outcome>('publish-throws', 'answered', 'timed-out', 'aborted'),
      { minLength: 1, maxLength: 8 },
    );
    await fc.assert(
      fc.asyncProperty(outcomes, fc.boolean(), async (sequence, together) => {
        const settled = together
          ? await Promise.all(sequence.map(callEnding))
          : await sequence.reduce<Promise<unknown[]>>(
              async (done, outcome) => [...(await done), await callEnding(outcome)],
              Promise.resolve([]),
            );
        for (const [i, outcome] of sequence.entries()) {
          const expected = {
            'publish-throws': -32011,
            answered: undefined,
            'timed-out': -32012,
            aborted: undefined,
          }[outcome];
          if (outcome === 'answered') expect(settled[i]).toBe('ok');
          else if (expected !== undefined) expect(settled[i]).toMatchObject({ code: expected });
        }
        // A call given up keeps its slot until the NATS server has its request (a flush).
        await waitFor(() => endpoint.inFlight === 0, 'every slot let go');
        await waitFor(async () => (await subscriptionsOf(endpoint)) === 0, 'no subscription left');
      }),
      { numRuns: 25 },
    );
  });
});

/**
 * A dropped event stream is resumed from the last event the client has, even when that is none:
 * the resume names it (Last-Event-ID 0 before any event with an id arrived), so the server
 * replays what it sent while the stream was away, and a call answered then is not lost.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/client.js';
import { sseSocket } from '../../src/client/sse-transport.js';
import { deferred } from '../support/promises.js';
import type { Deferred } from '../support/promises.js';
import { waitUntil, within } from '../support/waiting.js';
import { cutAfterSessionEvent } from './cut-stream.js';
import { heldCallsGateway } from './held-calls-gateway.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface StreamTransport {
  lastEventId: number;
  stream?: { destroy(): void };
}

/**
 * fetch, recording each GET's Last-Event-ID; every GET after the first waits for `release`, so
 * that the server sends while no stream is attached. `cutAfterSession` ends a resumed stream's
 * body right after its session event, as a proxy dropping it there would.
 */
function resumingFetch() {
  const lastEventIds: (string | undefined)[] = [];
  const gates: Deferred<void>[] = [];
  let cutAfterSession = false;
  const watched = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const method = init?.method ?? 'GET';
    if (method !== 'GET') return fetch(input, init);
    const headers = (init?.headers ?? {}) as Record<string, string>;
    lastEventIds.push(headers['last-event-id']);
    if (lastEventIds.length > 1) {
      const gate = deferred();
      gates.push(gate);
      await gate.promise;
    }
    const res = await fetch(input, init);
    if (!cutAfterSession || lastEventIds.length === 1 || !res.body) return res;
    cutAfterSession = false;
    return cutAfterSessionEvent(res);
  };
  return {
    fetch: watched as typeof fetch,
    lastEventIds,
    /** Let the `n`th resume (from 1) through. */
    release: async (n: number) => {
      await waitUntil(() => gates.length >= n, `resume ${n}`);
      gates[n - 1]!.resolve();
    },
    cutNextResumeAfterSession: () => (cutAfterSession = true),
  };
}

async function setUp() {
  const { running, answers } = await heldCallsGateway(cleanups);
  const resuming = resumingFetch();
  const rpc = new RpcClient({
    url: running.url,
    WebSocket: sseSocket({ fetch: resuming.fetch }),
    reconnect: false,
    heartbeat: false,
    callTimeoutMs: 5_000,
  });
  cleanups.push(() => rpc.close());
  await rpc.opened();
  const transport = () =>
    [...running.gateway.sessions.values()][0]!.transport as unknown as StreamTransport;
  return { ...running, rpc, answers, transport, ...resuming };
}

describe('HTTP streaming fallback (client): a resume before any event with an id', () => {
  it('asks for the events after 0, and gets the reply sent while the stream was away', async () => {
    const { rpc, answers, transport, lastEventIds, release } = await setUp();
    const call = rpc.call('held');
    await waitUntil(() => answers.length === 1, 'the call to reach the server');
    expect(transport().lastEventId).toBe(0);
    transport().stream!.destroy(); // the stream drops before any event with an id
    await waitUntil(() => lastEventIds.length === 2, 'the resume');
    answers[0]!.resolve('answered'); // event 1, sent with no stream attached
    await waitUntil(() => transport().lastEventId === 1, 'the reply sent');
    await release(1);
    expect(await within(call, 'the reply, replayed')).toBe('answered');
    expect(lastEventIds).toEqual([undefined, '0']);
  });

  it("keeps the last id it saw: a resumed stream's session event does not move it", async () => {
    const { rpc, answers, transport, lastEventIds, release, cutNextResumeAfterSession } =
      await setUp();
    const first = rpc.call('held');
    await waitUntil(() => answers.length === 1, 'the first call to reach the server');
    answers[0]!.resolve('one');
    expect(await first).toBe('one'); // event 1, read
    const second = rpc.call('held');
    await waitUntil(() => answers.length === 2, 'the second call to reach the server');
    transport().stream!.destroy();
    await waitUntil(() => lastEventIds.length === 2, 'the first resume');
    answers[1]!.resolve('two'); // event 2, sent with no stream attached
    await waitUntil(() => transport().lastEventId === 2, 'the reply sent');
    // The first resume's session event (lastEventId 2) arrives, then the stream drops before
    // event 2 is replayed: the next resume still asks for what came after 1.
    cutNextResumeAfterSession();
    await release(1);
    await release(2);
    expect(await within(second, 'the reply, replayed')).toBe('two');
    expect(lastEventIds).toEqual([undefined, '1', '1']);
  });
});

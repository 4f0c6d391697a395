/**
 * An event stream that goes silent without ending (a connection that died unsaid: a phone that
 * changed networks, a proxy holding the stream) is resumed once `maxSilenceMs` passes with
 * nothing read, from the last event read: a reply the server sent on it meanwhile comes again
 * from the replay buffer and its call is answered, instead of waiting for the heartbeat to give
 * the whole connection up (or for ever with none).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/client.js';
import { sseSocket } from '../../src/client/sse-transport.js';
import { waitUntil, within } from '../support/waiting.js';
import { heldCallsGateway } from './held-calls-gateway.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** `res` whose body passes its session event, then brings nothing more, never ending. */
function silentAfterSessionEvent(res: Response): Response {
  if (!res.body) return res;
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let passed = false;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (passed) return new Promise<void>(() => undefined);
      const chunk = await reader.read();
      if (chunk.done) return controller.close();
      text += decoder.decode(chunk.value, { stream: true });
      const session = /^event: session\n[^\n]*\n\n/.exec(text);
      if (!session) return;
      controller.enqueue(new TextEncoder().encode(session[0]));
      passed = true;
    },
    cancel: () => reader.cancel(),
  });
  return new Response(body, { status: res.status, headers: res.headers });
}

describe('HTTP streaming fallback (client): a stream gone silent', () => {
  it('is resumed after maxSilenceMs, and the reply sent on it meanwhile is answered', async () => {
    const { running, answers } = await heldCallsGateway(cleanups);
    const gets: (string | undefined)[] = [];
    const silencing = (async (input: RequestInfo | URL, init?: RequestInit) => {
      if ((init?.method ?? 'GET') !== 'GET') return fetch(input, init);
      gets.push((init?.headers as Record<string, string> | undefined)?.['last-event-id']);
      const res = await fetch(input, init);
      return gets.length === 1 ? silentAfterSessionEvent(res) : res;
    }) as typeof fetch;
    const rpc = new RpcClient({
      url: running.url,
      WebSocket: sseSocket({ fetch: silencing, maxSilenceMs: 500 }),
      reconnect: false,
      heartbeat: false,
      callTimeoutMs: 0,
    });
    cleanups.push(() => rpc.close());
    await rpc.opened();
    const call = rpc.call('held');
    await waitUntil(() => answers.length === 1, 'the call to reach the server');
    answers[0]!.resolve('answered'); // event 1, written to the stream that brings nothing
    expect(await within(call, 'the reply, replayed on the resumed stream')).toBe('answered');
    expect(gets).toEqual([undefined, '0']);
    expect(rpc.state).toBe('open');
  });
});

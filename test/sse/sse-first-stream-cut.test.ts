/**
 * What a session sends before its first event stream comes (a connected$ observer's
 * notification or call) is carried by that stream after its session event, which says the
 * stream's events follow on from 0. A first stream cut right after its session event is resumed
 * from there, and those messages come on the resumed stream: none is lost.
 */
import { afterEach, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/client.js';
import { sseSocket } from '../../src/client/sse-transport.js';
import { startGateway } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';
import { cutAfterSessionEvent } from './cut-stream.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A fetch whose first GET's body ends, with an error, right after the session event. */
function cuttingFetch() {
  const lastEventIds: (string | undefined)[] = [];
  const sessionEvents: string[] = [];
  let gets = 0;
  const wrapped = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    if ((init?.method ?? 'GET') !== 'GET') return fetch(input, init);
    lastEventIds.push((init?.headers as Record<string, string> | undefined)?.['last-event-id']);
    const res = await fetch(input, init);
    if (++gets > 1) return res;
    return cutAfterSessionEvent(res, (event) => sessionEvents.push(event));
  };
  return { fetch: wrapped as typeof fetch, lastEventIds, sessionEvents };
}

it('a notification and a call sent before the first stream reach a client whose first stream was cut after its session event', async () => {
  const { gateway, url } = await startGateway({ routes: { events: '/rpc/events' } });
  cleanups.push(() => gateway.close({ timeoutMs: 500 }));
  const answers: unknown[] = [];
  gateway.connected$.subscribe((session) => {
    session.notify('welcome', { id: session.id });
    void session.call('client.confirm', ['Proceed?']).then((answer) => answers.push(answer));
  });
  const cutting = cuttingFetch();
  const client = new RpcClient({
    url,
    WebSocket: sseSocket({ fetch: cutting.fetch }),
    reconnect: false,
    heartbeat: false,
  });
  cleanups.push(() => client.close());
  const welcomes: unknown[] = [];
  client.notificationsOf('welcome').subscribe((params) => welcomes.push(params));
  client.method('client.confirm', () => 'yes');
  await client.opened();
  await waitUntil(() => answers.length === 1 && welcomes.length === 1, 'the welcome and the call');
  expect(answers).toEqual(['yes']);
  expect(welcomes).toHaveLength(1);
  // The first stream said its events follow on from 0; the resume asked for what came after it.
  expect(cutting.sessionEvents[0]).toContain('"lastEventId":0}');
  expect(cutting.lastEventIds).toEqual([undefined, '0']);
});

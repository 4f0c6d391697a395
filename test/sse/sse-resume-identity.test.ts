/**
 * A resumed event stream goes on from its own session, or the loss is told. The server refuses
 * (400) a GET that carries a Last-Event-ID but names no session, instead of opening a new session
 * that would go on as if it were the old one; it reads a Last-Event-ID of digits only. The client
 * takes a resumed stream only from its own session, going on after the last event it read: a
 * proxy that drops the session's headers on the resume costs the connection (1006, the client
 * reconnects and resubscribes), never the subscription's messages unsaid.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/client.js';
import { sseSocket } from '../../src/client/sse-transport.js';
import { startGateway } from '../support/gateway.js';
import { waitUntil, within } from '../support/waiting.js';
import { exchange, openStream, post, resumeHeaders } from './sse-raw.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function gateway() {
  const running = await startGateway({ routes: { events: '/rpc/events' } });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  running.gateway.topic('feed');
  return { ...running, events: `http://127.0.0.1:${running.port}/rpc/events` };
}

describe('HTTP streaming fallback: a resume goes on from its own session', () => {
  it('server: a Last-Event-ID without a session is refused, and opens no session', async () => {
    const { gateway: gw, events } = await gateway();
    for (const refused of [
      await exchange(events, 'GET', { 'last-event-id': '3' }),
      await exchange(`${events}?lastEventId=3`, 'GET'),
    ]) {
      expect(refused.status).toBe(400);
      expect(refused.text).toMatch(/^A resume names its session/);
    }
    expect(gw.sessions.size).toBe(0);
  });

  it('server: a Last-Event-ID that is not digits is refused, the stream left as it is', async () => {
    const { events } = await gateway();
    const stream = await openStream(events);
    cleanups.push(() => stream.destroy());
    // Event 1 (the ping's reply): an id any of these would read as, were it read loosely.
    await post(events, stream.session, '{"jsonrpc":"2.0","id":1,"method":"rpc.ping"}');
    await stream.until((all) => all.some((e) => e.id === '1'));
    for (const id of ['0x1', '1e0', '+1', '1.0', '0b1', '-1', '01e0']) {
      const refused = await exchange(events, 'GET', resumeHeaders(stream.session, id));
      expect([id, refused.status]).toEqual([id, 400]);
    }
    const resumed = await openStream(events, { headers: resumeHeaders(stream.session, '1') });
    cleanups.push(() => resumed.destroy());
    expect(resumed.status).toBe(200);
  });

  for (const [dropped, reason] of [
    [['x-wsrpc-session', 'x-wsrpc-secret'], 'event stream answered 400'],
    [
      ['x-wsrpc-session', 'x-wsrpc-secret', 'last-event-id'],
      'the resumed stream does not go on from this session',
    ],
  ] as const) {
    it(`client: a resume without ${dropped.join(', ')} (a proxy dropped them) is a lost connection, not a silent one`, async () => {
      const { gateway: gw, url } = await gateway();
      let gets = 0;
      // A proxy that drops those headers from every resume (the second GET on).
      const stripping = (async (input: RequestInfo | URL, init?: RequestInit) => {
        if ((init?.method ?? 'GET') !== 'GET' || ++gets === 1) return fetch(input, init);
        const headers = { ...(init?.headers as Record<string, string>) };
        for (const name of dropped) delete headers[name];
        return fetch(input, { ...init, headers });
      }) as typeof fetch;
      const rpc = new RpcClient({
        url,
        WebSocket: sseSocket({ fetch: stripping }),
        reconnect: false,
        heartbeat: false,
      });
      cleanups.push(() => rpc.close());
      const got: unknown[] = [];
      rpc.subscribe('feed').subscribe({ next: (m) => got.push(m), error: () => undefined });
      await waitUntil(() => gw.pubsub.topics()['feed'] === 1, 'the subscription');
      await gw.publish('feed', 1);
      await waitUntil(() => got.length === 1, 'message 1');
      const transport = [...gw.sessions.values()][0]!.transport as unknown as {
        stream?: { destroy(): void };
      };
      transport.stream!.destroy();
      await within(
        new Promise<void>((resolve) => rpc.disconnects$.subscribe(() => resolve())),
        'the connection lost',
      );
      expect(rpc.lastDisconnect).toMatchObject({ code: 1006, reason });
      expect(gets).toBe(2);
    });
  }
});

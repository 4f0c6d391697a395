/**
 * Without `allowedOrigins`, the event-stream route holds every request to the rule an upgrade is
 * held to: a browser's Origin must name the host the request was sent to. A page on another site
 * gets 403 on a session's POST, resume and DELETE as on the opening GET (cookies go with its
 * requests, so its calls would run as the user), and the session is left as it is; a page on
 * the same host, any port, and a program that sends no Origin, are let in.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';
import { exchange, openStream, post, resumeHeaders, sessionHeaders } from './sse-raw.js';
import type { RawStream, SseEvent } from './sse-raw.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function sseGateway() {
  const running = await startGateway({ routes: { events: '/rpc/events' } });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  running.gateway.method('add', ([a, b]: [number, number]) => a + b);
  const events = `${running.httpUrl}/rpc/events`;
  const open = async (headers?: Record<string, string>): Promise<RawStream> => {
    const stream = await openStream(events, { headers });
    cleanups.push(() => stream.destroy());
    return stream;
  };
  return { ...running, events, open };
}

const call = (id: number): string =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'add', params: [id, id] });

const withId = (id: number) => (events: SseEvent[]) =>
  events.some((e) => e.event === 'message' && (JSON.parse(e.data) as { id?: unknown }).id === id);

describe('event-stream requests without allowedOrigins (same host only)', () => {
  const stranger = 'http://evil.example';

  it('refuses a page on another host 403 on POST, resume and DELETE, the session untouched', async () => {
    const { gateway, events, open } = await sseGateway();
    // The opening GET from that page is refused as its upgrade would be.
    expect((await open({ origin: stranger })).status).toBe(403);
    // A session of the user's own page (no Origin on a same-origin GET).
    const stream = await open();
    expect(stream.status).toBe(200);
    const foreign = sessionHeaders(stream.session, {
      origin: stranger,
      'content-type': 'application/json',
    });
    const sent = await exchange(events, 'POST', foreign, call(1));
    expect(sent.status).toBe(403);
    expect(sent.headers['access-control-allow-origin']).toBeUndefined();
    const resumed = await open({ ...resumeHeaders(stream.session, 0), origin: stranger });
    expect(resumed.status).toBe(403);
    const ended = await exchange(events, 'DELETE', foreign);
    expect(ended.status).toBe(403);
    expect(gateway.sessions.size).toBe(1);

    // The refused POST never reached the session: the next call's reply is its first message.
    expect((await post(events, stream.session, call(2))).status).toBe(202);
    await stream.until(withId(2));
    expect(stream.messages()).toEqual([{ jsonrpc: '2.0', id: 2, result: 4 }]);
  });

  it('lets a page on the same host (any port) and a request without Origin in', async () => {
    const { gateway, events, open, port } = await sseGateway();
    const stream = await open();
    // A same-origin POST carries the page's Origin; another port of the host is the same site.
    for (const [i, origin] of [`http://127.0.0.1:${port}`, 'https://127.0.0.1:1'].entries()) {
      const headers = sessionHeaders(stream.session, {
        origin,
        'content-type': 'application/json',
      });
      expect((await exchange(events, 'POST', headers, call(i + 1))).status).toBe(202);
      await stream.until(withId(i + 1));
    }
    const resumed = await open({
      ...resumeHeaders(stream.session, 2),
      origin: `http://127.0.0.1:${port}`,
    });
    expect(resumed.status).toBe(200);
    cleanups.push(() => stream.destroy());
    const ended = await exchange(events, 'DELETE', sessionHeaders(resumed.session));
    expect(ended.status).toBe(204);
    await waitUntil(() => gateway.sessions.size === 0, 'the session ended');
  });
});

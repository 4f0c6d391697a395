/**
 * Without `allowedOrigins`, a page on the gateway's host but another port (a dev server: Vite on
 * :5173, the gateway on :8080) may use the event-stream route as it may open a WebSocket: every
 * answer to it, a preflight's included, grants its Origin (CORS with credentials, Retry-After
 * exposed), so that the session its opening GET makes is one the browser lets it read. A page on
 * another host, or on a port of the host that a list leaves out, is refused 403 before any
 * session is made: a browser would hide the stream from it, and the session would wait out
 * sseGraceMs for a client that never reads it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/client.js';
import { sseSocket } from '../../src/client/sse-transport.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { startGateway } from '../support/gateway.js';
import { sampleValue, scrape } from '../support/metrics.js';
import { waitUntil } from '../support/waiting.js';
import { exchange, openStream, resumeHeaders, sessionHeaders } from './sse-raw.js';
import type { RawStream, SseEvent } from './sse-raw.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function sseGateway(options: GatewayOptions<unknown> = {}) {
  let authenticated = 0;
  const running = await startGateway({
    routes: { events: '/rpc/events' },
    authenticate: () => ++authenticated,
    ...options,
  });
  const { gateway } = running;
  cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
  gateway.method('add', ([a, b]: [number, number]) => a + b);
  let connected = 0;
  const counting = gateway.connected$.subscribe(() => connected++);
  cleanups.push(() => counting.unsubscribe());
  const events = `${running.httpUrl}/rpc/events`;
  const open = async (headers?: Record<string, string>, query = ''): Promise<RawStream> => {
    const stream = await openStream(`${events}${query}`, { headers });
    cleanups.push(() => stream.destroy());
    return stream;
  };
  return {
    ...running,
    events,
    open,
    /** Sessions opened so far, and how many times `authenticate` ran. */
    counts: () => ({ connected, authenticated }),
  };
}

const call = (id: number): string =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'add', params: [id, id] });

const withId = (id: number) => (events: SseEvent[]) =>
  events.some((e) => e.event === 'message' && (JSON.parse(e.data) as { id?: unknown }).id === id);

type ResponseHeaders = Record<string, string | string[] | undefined>;

const corsOf = (headers: ResponseHeaders) => ({
  origin: headers['access-control-allow-origin'],
  credentials: headers['access-control-allow-credentials'],
  exposed: headers['access-control-expose-headers'],
  vary: headers['vary'],
});
const grantedTo = (origin: string) => ({
  origin,
  credentials: 'true',
  exposed: 'retry-after',
  vary: 'Origin',
});
const none = { origin: undefined, credentials: undefined, exposed: undefined, vary: undefined };

const listOf = (value: unknown): string[] =>
  String(value)
    .toLowerCase()
    .split(/,\s*/)
    .filter((name) => name !== '');

/** Request headers a page may send without a preflight (the Fetch standard's safelist, in short). */
function safelisted(name: string, value: string): boolean {
  if (name === 'accept' || name === 'accept-language' || name === 'content-language') return true;
  const type = value.split(';')[0]!.trim().toLowerCase();
  return (
    name === 'content-type' &&
    ['application/x-www-form-urlencoded', 'multipart/form-data', 'text/plain'].includes(type)
  );
}

/**
 * fetch as a browser makes it for a page on `origin` with `credentials: 'include'` (the Fetch
 * standard's CORS checks, in short): a request with a method or a header CORS does not let
 * through goes after a preflight that grants them; a response, the preflight's included, whose
 * Access-Control-Allow-Origin is not the page's origin, or without
 * Access-Control-Allow-Credentials: true, is a network error (TypeError), all the page's client
 * learns. `log` gets each request's method and status.
 */
function pageFetch(origin: string, log: string[]): typeof fetch {
  const lets = (res: Response): boolean =>
    res.headers.get('access-control-allow-origin') === origin &&
    res.headers.get('access-control-allow-credentials') === 'true';
  return async (input, init = {}) => {
    const url = input instanceof Request ? input.url : String(input);
    const method = (init.method ?? 'GET').toUpperCase();
    const headers = new Headers(init.headers);
    const unsafe = [...headers]
      .filter(([name, value]) => !safelisted(name, value))
      .map(([name]) => name);
    const simple = ['GET', 'HEAD', 'POST'].includes(method);
    if (!simple || unsafe.length > 0) {
      const asked: Record<string, string> = { origin, 'access-control-request-method': method };
      if (unsafe.length > 0) asked['access-control-request-headers'] = unsafe.sort().join(',');
      const preflight = await fetch(url, { method: 'OPTIONS', headers: asked });
      await preflight.arrayBuffer();
      log.push(`OPTIONS ${preflight.status}`);
      const methods = listOf(preflight.headers.get('access-control-allow-methods'));
      const allowed = listOf(preflight.headers.get('access-control-allow-headers'));
      if (
        !preflight.ok ||
        !lets(preflight) ||
        !(simple || methods.includes(method.toLowerCase())) ||
        unsafe.some((name) => !allowed.includes(name))
      ) {
        throw new TypeError('Failed to fetch (preflight)');
      }
    }
    headers.set('origin', origin);
    const res = await fetch(url, { ...init, method, headers });
    log.push(`${method} ${res.status}`);
    if (!lets(res)) {
      await res.body?.cancel();
      throw new TypeError('Failed to fetch (CORS)');
    }
    return res;
  };
}

describe('the event stream from a page on the same host, another port (no allowedOrigins)', () => {
  const devServer = 'http://127.0.0.1:5173';

  it('grants it CORS on every step: preflights, opening GET, POST, keepalive, resume, DELETE', async () => {
    const { gateway, events, open, counts } = await sseGateway();
    const page = { origin: devServer };
    const granted = grantedTo(devServer);

    // What the client's requests ask a preflight for: the opening GET (with a header of the
    // page's own), a resume, a POST, a keepalive and DELETE.
    const asks: [string, string][] = [
      ['GET', 'authorization'],
      ['GET', 'last-event-id,x-wsrpc-secret,x-wsrpc-session'],
      ['POST', 'content-type,x-wsrpc-secret,x-wsrpc-session'],
      ['POST', 'x-wsrpc-keepalive,x-wsrpc-secret,x-wsrpc-session'],
      ['DELETE', 'x-wsrpc-secret,x-wsrpc-session'],
    ];
    for (const [method, headers] of asks) {
      const preflight = await exchange(events, 'OPTIONS', {
        ...page,
        'access-control-request-method': method,
        'access-control-request-headers': headers,
      });
      expect(preflight.status).toBe(204);
      expect(corsOf(preflight.headers)).toEqual(granted);
      expect(listOf(preflight.headers['access-control-allow-methods'])).toContain(
        method.toLowerCase(),
      );
      expect(listOf(preflight.headers['access-control-allow-headers'])).toEqual(
        expect.arrayContaining(headers.split(',')),
      );
    }
    expect(counts()).toEqual({ connected: 0, authenticated: 0 });

    // The opening GET as the client sends it (keepalive asked in the query, no preflight).
    const stream = await open({ ...page, accept: 'text/event-stream' }, '?keepalive=1');
    expect(stream.status).toBe(200);
    expect(corsOf(stream.response.headers)).toEqual(granted);
    expect(counts()).toEqual({ connected: 1, authenticated: 1 });

    const sent = await exchange(
      events,
      'POST',
      sessionHeaders(stream.session, { ...page, 'content-type': 'application/json' }),
      call(1),
    );
    expect(sent.status).toBe(202);
    expect(corsOf(sent.headers)).toEqual(granted);
    await stream.until(withId(1));
    expect(stream.messages()).toEqual([{ jsonrpc: '2.0', id: 1, result: 2 }]);

    const kept = await exchange(
      events,
      'POST',
      sessionHeaders(stream.session, { ...page, 'x-wsrpc-keepalive': '1' }),
    );
    expect(kept.status).toBe(204);
    expect(corsOf(kept.headers)).toEqual(granted);

    // A resume from before the reply: the reply again, then the stream goes on.
    const resumed = await open({ ...resumeHeaders(stream.session, 0), ...page });
    expect(resumed.status).toBe(200);
    expect(corsOf(resumed.response.headers)).toEqual(granted);
    await resumed.until(withId(1));
    const again = await exchange(
      events,
      'POST',
      sessionHeaders(stream.session, { ...page, 'content-type': 'application/json' }),
      call(2),
    );
    expect(again.status).toBe(202);
    await resumed.until(withId(2));
    expect(resumed.messages()).toEqual([
      { jsonrpc: '2.0', id: 1, result: 2 },
      { jsonrpc: '2.0', id: 2, result: 4 },
    ]);

    const ended = await exchange(events, 'DELETE', sessionHeaders(stream.session, page));
    expect(ended.status).toBe(204);
    expect(corsOf(ended.headers)).toEqual(granted);
    await waitUntil(() => gateway.sessions.size === 0, 'the session ended');
    expect(counts()).toEqual({ connected: 1, authenticated: 1 });
  });

  it("runs the project's client through a browser's CORS checks on one session, ended at close", async () => {
    const { gateway, url, counts } = await sseGateway();
    const log: string[] = [];
    const rpc = new RpcClient({
      url,
      WebSocket: sseSocket({ fetch: pageFetch(devServer, log) }),
      reconnect: { initialDelayMs: 20, maxDelayMs: 50 },
      heartbeat: false,
    });
    cleanups.push(() => rpc.close());
    // A bounded wait: where the stream is hidden from the page, the client opens session after
    // session and the call never gets an answer.
    const answer = await Promise.race([
      rpc.call('add', [20, 22]),
      new Promise((resolve) => setTimeout(() => resolve('no answer'), 3_000).unref()),
    ]);
    expect({ answer, ...counts() }).toEqual({ answer: 42, connected: 1, authenticated: 1 });
    expect(await rpc.call('add', [1, 2])).toBe(3);
    expect(log).toEqual(['GET 200', 'OPTIONS 204', 'POST 202', 'OPTIONS 204', 'POST 202']);
    await rpc.close();
    // Told by its DELETE (preflighted as well), the gateway ends the session at once.
    await waitUntil(() => gateway.sessions.size === 0, 'the session ended');
    // The page logs the DELETE's answer once it arrives, after the gateway has ended the session.
    await waitUntil(() => log.at(-1) === 'DELETE 204', 'the DELETE answered');
    expect(log.slice(-2)).toEqual(['OPTIONS 204', 'DELETE 204']);
  });
});

describe('the event stream from a page the origin rule refuses', () => {
  const refusedEverywhere = async (
    running: Awaited<ReturnType<typeof sseGateway>>,
    origins: string[],
  ): Promise<void> => {
    const { gateway, events, open, counts, httpUrl } = running;
    for (const origin of origins) {
      const preflight = await exchange(events, 'OPTIONS', {
        origin,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type,x-wsrpc-secret,x-wsrpc-session',
      });
      expect(preflight.status).toBe(403);
      expect(corsOf(preflight.headers)).toEqual(none);
      // Each attempt a looping client would make: refused, not one session made.
      for (let attempt = 0; attempt < 3; attempt++) {
        const refused = await open({ origin, accept: 'text/event-stream' }, '?keepalive=1');
        expect(refused.status).toBe(403);
        expect(corsOf(refused.response.headers)).toEqual(none);
      }
    }
    expect(gateway.sessions.size).toBe(0);
    expect(counts()).toEqual({ connected: 0, authenticated: 0 });
    // Counted as an upgrade refused for its origin is (the gateway's first scrape).
    const text = await scrape(httpUrl);
    expect(sampleValue(text, 'rpc_rejected_upgrades_total', { reason: 'origin' })).toBe(
      origins.length * 3,
    );
  };

  it('refuses another host 403 before any session is made (no allowedOrigins)', async () => {
    const running = await sseGateway();
    // localhost is another host name than the 127.0.0.1 the requests are sent to.
    await refusedEverywhere(running, ['http://evil.example', 'http://localhost:5173', 'null']);
  });

  it('refuses a port of the same host that allowedOrigins leaves out, before any session', async () => {
    const listed = 'http://127.0.0.1:3000';
    const running = await sseGateway({ allowedOrigins: [listed] });
    await refusedEverywhere(running, ['http://127.0.0.1:5173']);
    // The listed page may: the list, not the host, decides.
    const stream = await running.open({ origin: listed });
    expect(stream.status).toBe(200);
    expect(corsOf(stream.response.headers)).toEqual(grantedTo(listed));
  });

  it("leaves the project's client with no session when the browser would refuse it", async () => {
    const { gateway, url, counts } = await sseGateway();
    const log: string[] = [];
    const rpc = new RpcClient({
      url,
      WebSocket: sseSocket({ fetch: pageFetch('http://evil.example', log) }),
      reconnect: { initialDelayMs: 20, maxDelayMs: 50 },
      heartbeat: false,
    });
    cleanups.push(() => rpc.close());
    const failed = rpc.call('add', [1, 1]).then(
      () => 'answered',
      () => 'failed',
    );
    await waitUntil(() => log.length >= 5, 'the client tried again and again');
    expect(new Set(log)).toEqual(new Set(['GET 403']));
    expect(gateway.sessions.size).toBe(0);
    expect(counts()).toEqual({ connected: 0, authenticated: 0 });
    await rpc.close();
    expect(await failed).toBe('failed');
  });
});

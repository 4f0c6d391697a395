/**
 * The event stream's route, the WebSocket's fallback: under `allowedOrigins: ['*']` every page is
 * granted CORS with credentials, as its upgrade is let in with its cookies (the client sends
 * every request with them, and a CORS answer without Allow-Credentials would fail it), unlike
 * POST /rpc; a session's POST whose body is compressed or not UTF-8 is refused (415) unread, as
 * on POST /rpc, and the session goes on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { GatewayOptions } from '../../src/server/options.js';
import { Resources } from '../support/resources.js';
import { exchange, openStream, sessionHeaders } from './sse-raw.js';
import type { RawStream } from './sse-raw.js';

const res = new Resources();
const streams: RawStream[] = [];
afterEach(async () => {
  for (const stream of streams.splice(0)) stream.destroy();
  await res.cleanup();
});

async function eventsGateway(options: GatewayOptions<unknown> = {}) {
  const running = await res.gateway({ routes: { events: '/rpc/events' }, ...options });
  running.gateway.method('add', ([a, b]: [number, number]) => a + b);
  const events = `${running.httpUrl}/rpc/events`;
  const open = async (headers: Record<string, string> = {}): Promise<RawStream> => {
    const stream = await openStream(events, { headers });
    streams.push(stream);
    return stream;
  };
  return { events, open };
}

const granted = (headers: Record<string, unknown>) => ({
  origin: headers['access-control-allow-origin'],
  credentials: headers['access-control-allow-credentials'],
});

describe('the event stream under allowedOrigins', () => {
  it('["*"] and a list grant a page its stream and preflights with credentials', async () => {
    for (const [allowedOrigins, credentials] of [
      [['*'], 'true'],
      [['https://app.example'], 'true'],
    ] as const) {
      const { events, open } = await eventsGateway({ allowedOrigins: [...allowedOrigins] });
      const origin = allowedOrigins[0] === '*' ? 'https://evil.example' : allowedOrigins[0];
      const stream = await open({ origin, cookie: 'sid=the-user' });
      expect(stream.status).toBe(200);
      expect(granted(stream.response.headers)).toEqual({ origin, credentials });
      const preflight = await exchange(events, 'OPTIONS', {
        origin,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type,x-wsrpc-secret,x-wsrpc-session',
      });
      expect(preflight.status).toBe(204);
      expect(granted(preflight.headers)).toEqual({ origin, credentials });
    }
  });
});

describe("a session's POST", () => {
  it('compressed or not UTF-8 is refused 415 unread; the session takes the next one', async () => {
    const { events, open } = await eventsGateway();
    const stream = await open();
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'add', params: [1, 1] });
    for (const [headers, text] of [
      [{ 'content-encoding': 'gzip' }, 'Content-Encoding gzip is not supported'],
      [{ 'content-type': 'application/json; charset=iso-8859-1' }, 'charset iso-8859-1'],
    ] as const) {
      const refused = await exchange(
        events,
        'POST',
        sessionHeaders(stream.session, { 'content-type': 'application/json', ...headers }),
        body,
      );
      expect(refused.status).toBe(415);
      expect(refused.text).toContain(text);
    }
    const sent = await exchange(
      events,
      'POST',
      sessionHeaders(stream.session, { 'content-type': 'application/json; charset=UTF-8' }),
      JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'add', params: [2, 2] }),
    );
    expect(sent.status).toBe(202);
    await stream.until((events) => events.some((e) => e.data.includes('"id":2')));
    expect(stream.messages()).toEqual([{ jsonrpc: '2.0', id: 2, result: 4 }]);
  });
});

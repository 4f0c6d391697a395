/**
 * POST /rpc grants an allowed cross-origin page what the event stream's route grants it,
 * credentials included: a page doing `fetch(url, { credentials: 'include' })` passes the
 * preflight and reads the answer, so `authenticate` can take its cookie over POST as over the
 * event stream and the WebSocket. A page from another origin gets none of it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { UpgradeRejection } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { exchange } from '../sse/sse-raw.js';

const resources = new Resources();
afterEach(() => resources.cleanup());

const PAGE = 'http://app.example';
const CORS_HEADERS = [
  'access-control-allow-origin',
  'access-control-allow-credentials',
  'access-control-expose-headers',
  'vary',
];

async function cookieGateway() {
  const running = await resources.gateway({
    allowedOrigins: [PAGE],
    routes: { events: '/rpc/events' },
    authenticate: ({ cookies }) => {
      if (cookies['sid'] !== 'ann-session') throw new UpgradeRejection(401, 'no session');
      return { user: 'ann' };
    },
  });
  running.gateway.method('who', (_params, ctx) => (ctx.session.context as { user: string }).user);
  return running;
}

const granted = (headers: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(CORS_HEADERS.map((name) => [name, headers[name]]));

describe('POST /rpc CORS', () => {
  it('answers a preflight with credentials allowed, as the event stream does', async () => {
    const { httpUrl } = await cookieGateway();
    const preflight = {
      origin: PAGE,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'content-type',
    };
    const rpc = await exchange(`${httpUrl}/rpc`, 'OPTIONS', preflight);
    const events = await exchange(`${httpUrl}/rpc/events`, 'OPTIONS', preflight);
    expect(rpc.status).toBe(204);
    expect(events.status).toBe(204);
    expect(rpc.headers['access-control-allow-origin']).toBe(PAGE);
    expect(rpc.headers['access-control-allow-credentials']).toBe('true');
    expect(granted(rpc.headers)).toEqual(granted(events.headers));
  });

  it("lets the page read the answer its cookie authenticated, and a refusal's", async () => {
    const { httpUrl } = await cookieGateway();
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'who' });
    const headers = { origin: PAGE, 'content-type': 'application/json' };
    const answered = await exchange(
      `${httpUrl}/rpc`,
      'POST',
      {
        ...headers,
        cookie: 'sid=ann-session',
      },
      body,
    );
    expect(JSON.parse(answered.text)).toEqual({ jsonrpc: '2.0', id: 1, result: 'ann' });
    expect(answered.headers['access-control-allow-origin']).toBe(PAGE);
    expect(answered.headers['access-control-allow-credentials']).toBe('true');

    const refused = await exchange(`${httpUrl}/rpc`, 'POST', headers, body);
    expect(refused.status).toBe(401);
    expect(refused.headers['access-control-allow-credentials']).toBe('true');
  });

  it('grants nothing to a page from another origin', async () => {
    const { httpUrl } = await cookieGateway();
    const preflight = await exchange(`${httpUrl}/rpc`, 'OPTIONS', {
      origin: 'http://evil.example',
      'access-control-request-method': 'POST',
    });
    expect(preflight.status).toBe(403);
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    expect(preflight.headers['access-control-allow-credentials']).toBeUndefined();
  });
});

/**
 * A standalone server's shutdown with its server API: the drain starts at once, whatever the
 * backends have in progress (a backend's call to a client that never answers held it for the
 * call's whole timeout), and the server API serves backends while the sessions drain (a routed
 * call ending during the drain publishes as it ends); it closes after them. A close of the server
 * API whose deadline passes answers what is still in progress 503, and finishes.
 */
import { Redis } from 'ioredis';
import { nanoid } from 'nanoid';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { serve } from '../../src/standalone/serve.js';
import type { StandaloneServer } from '../../src/standalone/serve.js';
import { resolveStandaloneConfig } from '../../src/standalone/standalone-config.js';
import { REDIS_URL } from '../support/brokers.js';
import { openRaw } from '../support/sockets.js';
import { Resources } from '../support/resources.js';
import { API_KEY, call, post, startApi } from '../server-api/support.js';
import type { ServerApi } from '../../src/server-api/index.js';

const res = new Resources();
const servers: StandaloneServer[] = [];
const apis: ServerApi[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  await Promise.all(apis.splice(0).map((api) => api.close({ deadlineMs: 0 })));
  await res.cleanup();
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** Far longer than any test waits: held for it, the test has failed already. */
const CALL_TIMEOUT_MS = 60_000;

describe('serve: shutdown with a server API', () => {
  it('drains at once with a backend’s call to a client in progress, and serves backends during the drain', async () => {
    const key = API_KEY;
    const config = resolveStandaloneConfig({
      listen: { host: '127.0.0.1', port: 0 },
      topics: { 'room.*': {} },
      serverApi: { listen: { host: '127.0.0.1', port: 0 }, keys: [key] },
      shutdown: { drainDeadlineMs: 3_000 },
    });
    const server = await serve(config, { logger: pino({ level: 'silent' }) });
    servers.push(server);
    const apiUrl = server.serverApiUrl!;
    // A client that answers no call of the server's (nor the drain's ping): it keeps the drain
    // going until DRAIN_PING_WAIT_MS, the time the backend below has to publish.
    const client = await openRaw(res, server.url);
    const subscription = (await client.request('subscribe', ['room.1'])).result as string;
    const [session] = server.gateway.sessions.values();
    const held = post(
      apiUrl,
      'callClient',
      { sessionId: session!.id, method: 'never', timeoutMs: CALL_TIMEOUT_MS },
      key,
    );
    await client.until(() => client.frames.some((f) => f.method === 'never'), 'the held call');

    const closing = server.close();
    await client.until(
      () => client.frames.some((f) => f.method === 'rpc.reconnect'),
      'the drain’s notice, with the backend’s call in progress',
    );
    // The server API still serves: what a backend publishes reaches the draining session.
    // (call throws unless the API answers with a result.)
    await call(apiUrl, 'publish', { topic: 'room.1', data: 'during the drain' });
    await client.until(
      () => client.notifications(subscription).some((n) => n.result === 'during the drain'),
      'the message published during the drain',
    );
    // The drain closes the session: the call to it is answered at once.
    expect((await held).body?.error?.code).toBe(-32011);
    await closing;
    expect((await client.closed).code).toBe(1012);
  });

  it('with a broker consumer: drains at once while a consumed call to a client is in progress', async () => {
    const stream = `wsrpc-serve-drain:${nanoid(8)}`;
    const redis = new Redis(REDIS_URL);
    cleanups.push(async () => {
      await redis.del(stream, `${stream}:dead-letter`);
      redis.disconnect();
    });
    const config = resolveStandaloneConfig({
      listen: { host: '127.0.0.1', port: 0 },
      serverApi: {
        listen: { host: '127.0.0.1', port: 0 },
        keys: [API_KEY],
        consume: { redisStream: stream, url: REDIS_URL },
      },
      shutdown: { drainDeadlineMs: 1_000 },
    });
    const server = await serve(config, { logger: pino({ level: 'silent' }) });
    servers.push(server);
    const client = await openRaw(res, server.url);
    await client.request('rpc.ping');
    const [session] = server.gateway.sessions.values();
    await redis.xadd(
      stream,
      '*',
      'request',
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'callClient',
        params: { sessionId: session!.id, method: 'never', timeoutMs: CALL_TIMEOUT_MS },
      }),
    );
    await client.until(() => client.frames.some((f) => f.method === 'never'), 'the consumed call');
    const closing = server.close();
    await client.until(
      () => client.frames.some((f) => f.method === 'rpc.reconnect'),
      'the drain’s notice, with the consumed call in progress',
    );
    await closing;
  });

  it('ServerApi.close({ deadlineMs }) answers a request still in progress 503 and finishes', async () => {
    const { gateway, url } = await res.gateway();
    const api = await startApi(gateway);
    apis.push(api);
    const client = await openRaw(res, url);
    await client.request('rpc.ping');
    const [session] = gateway.sessions.values();
    const held = fetch(api.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'callClient',
        params: { sessionId: session!.id, method: 'never', timeoutMs: CALL_TIMEOUT_MS },
      }),
    });
    await client.until(() => client.frames.some((f) => f.method === 'never'), 'the held call');
    await api.close({ deadlineMs: 50 });
    const response = await held;
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('1');
    expect(await response.text()).toBe('Server API closed\n');
  });
});

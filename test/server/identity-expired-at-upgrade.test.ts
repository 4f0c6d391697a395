// An authenticate hook of the application's own (not jwtAuth, which refuses an expired token
// itself) that accepts credentials whose identity has expired already (`identity.expiresAtOf` in
// the past): refused wherever the hook runs, as an expired credential, and no session opens.
// At the upgrade and on every transport that authenticates with the hook (event stream, HTTP
// POST, TCP) an HTTP 401 (a refusal line with status 401 on TCP); in-band -32010 `expired`.
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type { GatewayOptions } from '../../src/server/options.js';
import type { Session } from '../../src/server/session.js';
import { startGateway } from '../support/gateway.js';
import { sampleValue, scrape } from '../support/metrics.js';
import { Resources } from '../support/resources.js';
import { upgradeRefusal } from '../support/sockets.js';
import { exchange, openStream } from '../sse/sse-raw.js';
import { token, tokenIdentity } from './identity-tokens.js';
import type { TestContext } from './identity-tokens.js';
import { openRawRpc } from './raw-rpc.js';

const res = new Resources();
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await res.cleanup();
});

/** A token whose identity expired a second before the hook read it. */
const expired = token({ user: 'ann', ttl: -1_000 });
const bearer = { authorization: `Bearer ${expired}` };

/** A gateway whose hook reads the test tokens, with every session that opens recorded. */
async function start(options: Partial<GatewayOptions<TestContext>> = {}) {
  const running = await startGateway<TestContext>({
    ...tokenIdentity(),
    routes: { events: '/rpc/events' },
    ...options,
  });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  const opened: Session<TestContext>[] = [];
  const watching = running.gateway.connected$.subscribe((session) => opened.push(session));
  cleanups.push(() => watching.unsubscribe());
  running.gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
  return { ...running, opened };
}

describe('an identity that has expired when the hook accepts it', () => {
  it('is refused at the WebSocket upgrade with 401, no session opened', async () => {
    const { gateway, url, httpUrl, opened } = await start();
    const refused = await upgradeRefusal(res, url, undefined, bearer);
    expect(refused).toMatchObject({ status: 401, body: 'The token has expired\n' });
    expect(opened).toEqual([]);
    expect(gateway.sessions.size).toBe(0);
    const metrics = await scrape(httpUrl);
    expect(sampleValue(metrics, 'rpc_rejected_upgrades_total', { reason: 'unauthenticated' })).toBe(
      1,
    );
    // The same token with time left opens a session.
    const fresh = await openRawRpc(url, {
      authorization: `Bearer ${token({ user: 'ann', ttl: 60_000 })}`,
    });
    cleanups.push(() => fresh.close());
    expect((await fresh.request('whoami')).result).toBe('ann');
  });

  it('is refused on an event stream’s opening GET with 401, no session opened', async () => {
    const { gateway, httpUrl, opened } = await start();
    const stream = await openStream(`${httpUrl}/rpc/events`, { headers: bearer });
    cleanups.push(() => stream.destroy());
    expect(stream.status).toBe(401);
    expect(stream.body).toBe('The token has expired\n');
    expect(opened).toEqual([]);
    expect(gateway.sessions.size).toBe(0);
  });

  it('is refused on an HTTP POST with 401, the call not run', async () => {
    const { gateway, httpUrl } = await start();
    let ran = 0;
    gateway.method('count', () => ++ran);
    const call = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'count' });
    const posted = await exchange(
      `${httpUrl}/rpc`,
      'POST',
      { ...bearer, 'content-type': 'application/json' },
      call,
    );
    expect(posted).toMatchObject({ status: 401, text: 'The token has expired\n' });
    expect(ran).toBe(0);
  });

  it('is refused on a TCP connection with the refusal line (status 401)', async () => {
    // TCP carries no token: the hook names the identity itself.
    const { gateway, opened } = await start({ authenticate: () => ({ ...stale() }) });
    const { port } = await gateway.listenTcp(0, '127.0.0.1');
    const socket: Socket = connect(port, '127.0.0.1');
    cleanups.push(() => socket.destroy());
    socket.write('{"jsonrpc":"2.0","id":1,"method":"whoami"}\n');
    const line = await new Promise<string>((resolve, reject) => {
      let read = '';
      socket.on('data', (chunk: Buffer) => {
        read += chunk.toString('utf8');
        if (read.includes('\n')) resolve(read.slice(0, read.indexOf('\n')));
      });
      socket.once('error', reject);
    });
    expect(JSON.parse(line)).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: {
        code: ErrorCode.Unauthorized,
        message: 'The token has expired',
        data: { status: 401 },
      },
    });
    expect(opened).toEqual([]);
  });

  it('in-band, as at the upgrade: -32010 expired, the connection still unauthenticated', async () => {
    const { url, opened } = await start({
      identity: { ...tokenIdentity().identity, inBand: true },
    });
    const socket = await openRawRpc(url);
    cleanups.push(() => socket.close());
    const reply = await socket.request('rpc.authenticate', { token: expired });
    expect(reply.error).toMatchObject({
      code: ErrorCode.Unauthenticated,
      message: 'The token has expired',
      data: { reason: 'expired' },
    });
    expect(opened).toEqual([]);
    const good = await socket.request('rpc.authenticate', { token: token({ user: 'ann' }) });
    expect(good.result).toMatchObject({ user: 'ann' });
  });
});

/** An identity that expired a second ago. */
function stale(): TestContext {
  return { user: 'ann', expiresAt: Date.now() - 1_000, topics: undefined, methods: undefined };
}

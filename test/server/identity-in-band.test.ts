import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type { UpgradeRequest } from '../../src/server/options.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { openRawRpc } from './raw-rpc.js';
import type { RawRpc } from './raw-rpc.js';

interface Ctx {
  user: string;
}

let running: RunningGateway<Ctx> | undefined;
const sockets: RawRpc[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.close();
  await running?.gateway.close();
  running = undefined;
});

/** A gateway whose hook takes "good-<user>" tokens, recording every request it sees. */
async function start(seen: UpgradeRequest[] = [], inBandDeadlineMs = 10_000) {
  running = await startGateway<Ctx>({
    authenticate: (request) => {
      seen.push(request);
      const token = request.token;
      if (!token?.startsWith('good-')) throw new UpgradeRejection(401, 'invalid token');
      return { user: token.slice(5) };
    },
    userOf: (context) => context.user,
    identity: { inBand: true, inBandDeadlineMs },
  });
  running.gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
  return running;
}

async function open(url: string, headers?: Record<string, string>): Promise<RawRpc> {
  const socket = await openRawRpc(url, headers);
  sockets.push(socket);
  return socket;
}

describe('in-band authentication', () => {
  it('serves only rpc.ping and rpc.authenticate before it, drops notifications, pushes nothing', async () => {
    const { gateway, url } = await start();
    const seenNotes: string[] = [];
    gateway.method('note', (params) => void seenNotes.push(JSON.stringify(params)));
    const socket = await open(url);
    const refused = await socket.request('whoami');
    expect(refused.error).toEqual({
      code: ErrorCode.Unauthenticated,
      message: 'Unauthenticated',
      data: { reason: 'authentication required' },
    });
    expect((await socket.request('rpc.ping')).result).toBe('pong');
    socket.notify('note', ['x']);
    const [session] = gateway.sessions.values();
    expect(session!.isAuthenticated).toBe(false);
    session!.notify('hello', ['pushed']);
    // Not sent, so not claimed: notifySession answers false for it.
    expect(await gateway.notifySession(session!.id, 'hello', ['by id'])).toBe(false);
    await expect(session!.call('anything')).rejects.toMatchObject({
      code: ErrorCode.Unauthenticated,
    });
    expect((await socket.request('rpc.ping')).result).toBe('pong');
    expect(seenNotes).toEqual([]);
    expect(socket.notifications).toEqual([]);
  });

  it('answers the session id, user and expiry, then serves the connection as that user', async () => {
    const seen: UpgradeRequest[] = [];
    const { gateway, url } = await start(seen);
    const connected: string[] = [];
    gateway.connected$.subscribe((session) => connected.push(session.context.user));
    const socket = await open(url, { cookie: 'site=1' });
    expect(connected).toEqual([]);
    const reply = await socket.request('rpc.authenticate', { token: 'good-ann' });
    const [session] = gateway.sessions.values();
    expect(reply.result).toEqual({ sessionId: session!.id, user: 'ann' });
    expect(connected).toEqual(['ann']);
    expect((await socket.request('whoami')).result).toBe('ann');
    expect(session!.user).toBe('ann');
    // The same hook, with the upgrade's cookies and the in-band token.
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      phase: 'in-band',
      token: 'good-ann',
      cookies: { site: '1' },
      transport: 'websocket',
    });
    // notifyUser reaches it now.
    await gateway.notifyUser('ann', 'hello', ['you']);
    expect(await socket.notificationsAt(1)).toEqual([{ method: 'hello', params: ['you'] }]);
  });

  it('refuses a bad token with -32010 and the hook message; the third refusal closes 4401', async () => {
    const { url } = await start();
    const socket = await open(url);
    for (let attempt = 1; attempt <= 2; attempt++) {
      const reply = await socket.request('rpc.authenticate', { token: 'bad' });
      expect(reply.error).toEqual({
        code: ErrorCode.Unauthenticated,
        message: 'invalid token',
        data: { reason: 'invalid', status: 401 },
      });
    }
    const malformed = await socket.request('rpc.authenticate', { token: 42 });
    expect(malformed.error?.code).toBe(ErrorCode.InvalidParams);
    const third = await socket.request('rpc.authenticate', { token: 'bad' });
    expect(third.error?.code).toBe(ErrorCode.Unauthenticated);
    expect(await socket.closed).toEqual({ code: 4401, reason: 'authentication refused' });
  });

  it('closes a connection that does not authenticate within the deadline with 4408', async () => {
    const { url } = await start([], 150);
    // Taken before the socket opens: the deadline counts from the connection, which is later.
    const started = performance.now();
    const socket = await open(url);
    expect(await socket.closed).toEqual({ code: 4408, reason: 'authentication deadline' });
    // Not before the deadline (a timer fires at most a millisecond early).
    expect(performance.now() - started).toBeGreaterThanOrEqual(149);
  });

  it('a connection that authenticated in time is not closed at the deadline', async () => {
    const { url } = await start([], 150);
    const socket = await open(url);
    await socket.request('rpc.authenticate', { token: 'good-ann' });
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect((await socket.request('whoami')).result).toBe('ann');
  });

  it('authenticates a Bearer token at the upgrade with the same hook; a refusal is HTTP 401', async () => {
    const seen: UpgradeRequest[] = [];
    const { url } = await start(seen);
    const socket = await open(url, { authorization: 'Bearer good-bob' });
    expect((await socket.request('whoami')).result).toBe('bob');
    expect(seen[0]).toMatchObject({ phase: 'upgrade', token: 'good-bob' });
    await expect(openRawRpc(url, { authorization: 'Bearer bad' })).rejects.toMatchObject({
      status: 401,
    });
  });

  it('gives the Bearer token of an HTTP POST to the hook', async () => {
    const seen: UpgradeRequest[] = [];
    const { httpUrl } = await start(seen);
    const response = await fetch(`${httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'bearer good-cy' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'whoami' }),
    });
    expect(await response.json()).toMatchObject({ result: 'cy' });
    expect(seen[0]).toMatchObject({ transport: 'http', phase: 'upgrade', token: 'good-cy' });
  });
});

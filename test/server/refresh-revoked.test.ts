/**
 * A node that missed a revocation's message (written to the deny list, its broadcast lost) and
 * then reads the denial (docs/identity.md, Revocation). A refresh the deny list refuses: the
 * session's own credentials, issued before the refused ones, are revoked too, so the session
 * closes with 4403 once the refusal is answered. Another connection of the user refused by the
 * deny list: the user's sessions on the node close as the message would have closed them. A
 * session whose credentials were issued after the revocation stays open either way.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { openRawRpc } from './raw-rpc.js';
import type { RawRpc } from './raw-rpc.js';

interface Issued {
  user: string;
  issuedAt: number;
}

let running: RunningGateway<Issued> | undefined;
const sockets: RawRpc[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.close();
  await running?.gateway.close();
  running = undefined;
});

/** Tokens `user@issuedAt` (`recalled`: the hook's own refusal); the deny list is written straight to the broker (no broadcast). */
async function start() {
  const broker = new MemoryBroker();
  running = await startGateway<Issued>({
    broker,
    authenticate: ({ token }) => {
      if (token === 'recalled') throw new UpgradeRejection(401, 'token revoked by its issuer');
      const [user, issuedAt] = (token ?? '').split('@');
      if (!user || !issuedAt) throw new UpgradeRejection(401, 'invalid token');
      return { user, issuedAt: Number(issuedAt) };
    },
    userOf: (context) => context.user,
    identity: { issuedAtOf: (context) => context.issuedAt },
  });
  running.gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
  return { broker, url: running.url };
}

async function open(url: string, token: string): Promise<RawRpc> {
  const socket = await openRawRpc(url, { authorization: `Bearer ${token}` });
  sockets.push(socket);
  return socket;
}

describe('a refresh refused as revoked', () => {
  it('closes a session whose node missed the revocation (4403 revoked)', async () => {
    const { broker, url } = await start();
    const socket = await open(url, 'ann@1000');
    expect((await socket.request('whoami')).result).toBe('ann');
    // Revoked at 2000 on another node whose message never reached this one.
    await broker.deny('ann', 2_000, 60_000);
    expect((await socket.request('whoami')).result).toBe('ann');
    const refused = await socket.request('rpc.authenticate', { token: 'ann@1500' });
    expect(refused.error).toMatchObject({
      code: ErrorCode.Unauthenticated,
      data: { reason: 'revoked', status: 401 },
    });
    expect(await socket.closed).toEqual({ code: 4403, reason: 'revoked' });
  });

  it('leaves open a session whose credentials were issued after the revocation', async () => {
    const { broker, url } = await start();
    await broker.deny('bob', 2_000, 60_000);
    const socket = await open(url, 'bob@3000');
    // An older token, from before the revocation: refused, and nothing else changes.
    const refused = await socket.request('rpc.authenticate', { token: 'bob@1500' });
    expect(refused.error).toMatchObject({ data: { reason: 'revoked', status: 401 } });
    expect((await socket.request('whoami')).result).toBe('bob');
    const renewed = await socket.request('rpc.authenticate', { token: 'bob@4000' });
    expect(renewed.result).toMatchObject({ user: 'bob' });
    expect((await socket.request('whoami')).result).toBe('bob');
  });

  it('leaves the session open when the hook refuses a token while the deny list lists its user', async () => {
    const { broker, url } = await start();
    const socket = await open(url, 'dan@1000');
    await broker.deny('dan', 2_000, 60_000);
    // The hook refuses first: the deny list is not read.
    const refused = await socket.request('rpc.authenticate', { token: 'garbage' });
    expect(refused.error).toMatchObject({ data: { reason: 'invalid', status: 401 } });
    expect((await socket.request('whoami')).result).toBe('dan');
    // The deny list's own refusal of a refresh still ends it.
    await socket.request('rpc.authenticate', { token: 'dan@1500' });
    expect(await socket.closed).toEqual({ code: 4403, reason: 'revoked' });
  });

  it("leaves the session open when the hook's own refusal says revoked", async () => {
    const { url } = await start();
    const socket = await open(url, 'cat@1000');
    // Not the deny list's refusal: the application's hook may mean only the token presented.
    const refused = await socket.request('rpc.authenticate', { token: 'recalled' });
    expect(refused.error).toMatchObject({ data: { reason: 'revoked', status: 401 } });
    expect((await socket.request('whoami')).result).toBe('cat');
  });
});

describe('another connection of the user refused by the deny list', () => {
  it('closes the sessions on the node the missed revocation names, and only those', async () => {
    const { broker, url } = await start();
    const before = await open(url, 'eve@1000');
    const after = await open(url, 'eve@3000');
    const other = await open(url, 'fay@1000');
    // Revoked at 2000 on another node whose message never reached this one.
    await broker.deny('eve', 2_000, 60_000);
    expect((await before.request('whoami')).result).toBe('eve');
    await expect(open(url, 'eve@1500')).rejects.toThrow(/401/);
    expect(await before.closed).toEqual({ code: 4403, reason: 'revoked' });
    expect((await after.request('whoami')).result).toBe('eve');
    expect((await other.request('whoami')).result).toBe('fay');
  });

  it('closes them too when the refused connection was let in (credentials issued after)', async () => {
    const { broker, url } = await start();
    const before = await open(url, 'gus@1000');
    await broker.deny('gus', 2_000, 60_000);
    const renewed = await open(url, 'gus@2500');
    expect((await renewed.request('whoami')).result).toBe('gus');
    expect(await before.closed).toEqual({ code: 4403, reason: 'revoked' });
  });
});

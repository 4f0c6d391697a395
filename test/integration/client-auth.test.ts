// The client against the real gateway's identity (docs/identity.md): refused upgrades seen with
// their status and stopping the retries, a token provider called on every dial, in-band
// authentication, refresh on a live connection and at the server's request keeping every
// subscription, and expiry without a provider closing with 4419.
import { afterEach, describe, expect, it } from 'vitest';
import { AuthenticationError, UpgradeRejection } from '../../src/index.js';
import type { DisconnectEvent, UpgradeRequest } from '../../src/index.js';
import type { RpcClient } from '../../src/client/client.js';
import { Resources } from '../support/resources.js';
import { sleep } from '../support/promises.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

interface Identity {
  user: string;
  expiresAt: number;
}

/** Tokens are `<user>.<expiresAt>`; user "nobody" is forbidden; none at all is 401. */
function authenticate(request: UpgradeRequest): Identity {
  const token = request.token;
  if (!token) throw new UpgradeRejection(401, 'token required');
  const [user, expiresAt] = token.split('.');
  if (user === 'nobody') throw new UpgradeRejection(403, 'not allowed here');
  return { user: user!, expiresAt: Number(expiresAt) };
}

const tokenFor = (user: string, ttlMs = 60_000): string => `${user}.${Date.now() + ttlMs}`;

async function identityGateway(inBand = false, refreshAheadMs = 30_000) {
  const seen: (string | undefined)[] = [];
  const running = await res.gateway<Identity>({
    authenticate: (request) => {
      seen.push(request.token);
      return authenticate(request);
    },
    userOf: (context) => context.user,
    identity: { inBand, expiresAtOf: (context) => context.expiresAt, refreshAheadMs },
  });
  running.gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
  running.gateway.topic('news');
  running.gateway.topic('prices');
  return { ...running, seen };
}

function collect(client: RpcClient): DisconnectEvent[] {
  const events: DisconnectEvent[] = [];
  client.disconnects$.subscribe((event) => events.push(event));
  return events;
}

describe('a refused upgrade', () => {
  it.each([
    [401, undefined, 'token required'],
    [403, 'nobody', 'not allowed here'],
  ])(
    'HTTP %i is seen with its status and body, stops the retries and rejects calls',
    async (status, user, body) => {
      const { url, seen } = await identityGateway();
      const client = res.client(url, {
        tokenTransport: 'header',
        ...(user ? { getToken: () => tokenFor(user) } : {}),
      });
      const events = collect(client);
      const queued = client.call('whoami').catch((err: unknown) => err);
      const err = await client.opened().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AuthenticationError);
      expect(err).toMatchObject({ status, reason: body });
      expect(await queued).toBe(err);
      expect(events).toEqual([
        expect.objectContaining({ httpStatus: status, reason: body, error: err, willRetry: false }),
      ]);
      expect(client.state).toBe('closed');
      await sleep(150); // the backoff here is 20 ms: a retry would have come
      expect(seen).toHaveLength(1);
    },
  );
});

describe('credentials from a function', () => {
  it('calls the token provider on every dial', async () => {
    const { url, gateway, seen } = await identityGateway();
    let dials = 0;
    const client = res.client(url, {
      tokenTransport: 'header',
      getToken: () => Promise.resolve(tokenFor(`user${++dials}`)),
    });
    expect(await client.call('whoami')).toBe('user1');
    for (const session of gateway.sessions.values()) session.close(1012, 'restart');
    await waitUntil(() => gateway.sessions.size === 1 && client.state === 'open', 'reconnect');
    expect(await client.call('whoami')).toBe('user2');
    expect(seen.map((token) => token?.split('.')[0])).toEqual(['user1', 'user2']);
  });
});

describe('in-band authentication and refresh', () => {
  it('authenticates in-band with getToken before anything else is served', async () => {
    const { url, gateway } = await identityGateway(true);
    const client = res.client(url, { getToken: () => tokenFor('alice') });
    const news: unknown[] = [];
    client.subscribe('news').subscribe((m) => news.push(m));
    expect(await client.call('whoami')).toBe('alice');
    await gateway.publish('news', 1);
    await waitUntil(() => news.length === 1, 'the message');
  });

  it('an in-band refusal stops the client with AuthenticationError (-32010)', async () => {
    const { url, seen } = await identityGateway(true);
    const client = res.client(url, { getToken: () => tokenFor('nobody') });
    const events = collect(client);
    const err = await client.opened().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthenticationError);
    expect(err).toMatchObject({ code: -32010 });
    expect(events).toEqual([expect.objectContaining({ error: err, willRetry: false })]);
    await sleep(150);
    expect(seen).toHaveLength(1);
  });

  it('an in-band refusal for "unavailable" (503, try again) is retried like a 503 upgrade', async () => {
    // The hook cannot check the token for now (a key set or deny list down): 503 twice.
    let runs = 0;
    const { url, gateway } = await res.gateway<Identity>({
      authenticate: (request) => {
        if (++runs <= 2) throw new UpgradeRejection(503, 'key set unavailable: timed out');
        return authenticate(request);
      },
      userOf: (context) => context.user,
      identity: { inBand: true },
    });
    gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
    const client = res.client(url, { getToken: () => tokenFor('alice') });
    const events = collect(client);
    expect(await client.call('whoami')).toBe('alice');
    expect(runs).toBe(3);
    expect(events).toEqual([
      expect.objectContaining({ willRetry: true }),
      expect.objectContaining({ willRetry: true }),
    ]);
    expect(events[0]!.error).toMatchObject({ code: -32010, data: { reason: 'unavailable' } });
  });

  it('client.authenticate refreshes the live connection, keeping every subscription', async () => {
    const { url, gateway } = await identityGateway(true);
    const client = res.client(url, { getToken: () => tokenFor('alice', 5_000) });
    const events = collect(client);
    const got: unknown[] = [];
    client.subscribe('news').subscribe((m) => got.push(['news', m]));
    client.subscribe('prices').subscribe((m) => got.push(['prices', m]));
    await client.call('whoami');
    const [session] = [...gateway.sessions.values()];
    const later = Date.now() + 120_000;
    const result = await client.authenticate(`alice.${later}`);
    expect(result).toMatchObject({ sessionId: session!.id, expiresAt: later });
    expect(session!.expiresAt).toBe(later);
    await gateway.publish('news', 1);
    await gateway.publish('prices', 2);
    await waitUntil(() => got.length === 2, 'both messages');
    expect(got).toEqual([
      ['news', 1],
      ['prices', 2],
    ]);
    // Another user's token is refused and the old identity stays.
    await expect(client.authenticate(tokenFor('bob'))).rejects.toMatchObject({
      code: -32010,
      reason: 'user-changed',
    });
    expect(await client.call('whoami')).toBe('alice');
    expect(gateway.sessions.size).toBe(1);
    expect(events).toEqual([]);
  });

  it("answers the server's rpc.token from getToken before the identity expires", async () => {
    const { url, gateway } = await identityGateway(true, 1_000);
    let asked = 0;
    const client = res.client(url, {
      getToken: () => tokenFor('alice', ++asked === 1 ? 1_500 : 60_000),
    });
    const events = collect(client);
    const news: unknown[] = [];
    client.subscribe('news').subscribe((m) => news.push(m));
    await client.call('whoami');
    const [session] = [...gateway.sessions.values()];
    await waitUntil(() => asked === 2, 'the server asking for a fresh token', 5_000);
    await waitUntil(() => session!.expiresAt! > Date.now() + 30_000, 'the refreshed identity');
    await sleep(800); // past the first token's expiry
    await gateway.publish('news', 'still here');
    await waitUntil(() => news.length === 1, 'the message');
    expect([...gateway.sessions.values()]).toEqual([session]);
    expect(events).toEqual([]);
  });

  it('expiry without a provider closes with 4419, seen on disconnects$, and stops', async () => {
    const { url } = await identityGateway(false, 0);
    const token = tokenFor('alice', 400);
    const client = res.client(url, { headers: { authorization: `Bearer ${token}` } });
    const events = collect(client);
    expect(await client.call('whoami')).toBe('alice');
    await waitUntil(() => client.state === 'closed', 'the expiry', 5_000);
    expect(events).toEqual([
      expect.objectContaining({
        code: 4419,
        willRetry: false,
        error: expect.any(AuthenticationError) as unknown,
      }),
    ]);
  });
});

describe('connections per user (limits.maxConnectionsPerUser)', () => {
  async function oneEachGateway(inBand: boolean) {
    const running = await res.gateway<Identity>({
      authenticate,
      userOf: (context) => context.user,
      identity: { inBand },
      limits: { maxConnectionsPerUser: 1 },
    });
    running.gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
    return running;
  }

  it.each([
    // The client closes the connection on the -32000 answer, ahead of the server's 4429.
    [
      'in-band',
      true,
      { reason: 'authentication failed', error: expect.objectContaining({ code: -32000 }) },
    ],
    ['at the upgrade', false, { httpStatus: 429 }],
  ] as const)(
    'a client past the bound (%s) keeps retrying, its calls queued, and opens once a place is free',
    async (_how, inBand, refusal) => {
      const { url, gateway } = await oneEachGateway(inBand);
      const tokenTransport = inBand ? 'in-band' : 'header';
      const first = res.client(url, { tokenTransport, getToken: () => tokenFor('alice') });
      expect(await first.call('whoami')).toBe('alice');
      const second = res.client(url, { tokenTransport, getToken: () => tokenFor('alice') });
      const events = collect(second);
      const queued = second.call('whoami');
      await waitUntil(() => events.length >= 2, 'two refused attempts');
      for (const event of events) expect(event).toMatchObject({ ...refusal, willRetry: true });
      expect(second.state).not.toBe('closed');
      // Another user is not held back by alice's bound.
      const bob = res.client(url, { tokenTransport, getToken: () => tokenFor('bob') });
      expect(await bob.call('whoami')).toBe('bob');
      await first.close();
      expect(await queued).toBe('alice');
      expect(gateway.sessions.size).toBe(2);
    },
  );
});

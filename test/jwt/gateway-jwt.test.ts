// jwtAuth in a real gateway, over real sockets: `createGateway({ ...jwtAuth(...) })`, the token
// in the upgrade's Authorization header (and a POST's), the claims reaching the handlers, each
// bad token refused with 401 and its reason in the body and WWW-Authenticate, a key set that
// cannot be fetched with 503; in-band, the same refusals as -32010.
import { WebSocket } from 'ws';
import type { ClientOptions as WsClientOptions } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { jwtAuth, jwtDefaults } from '../../src/jwt.js';
import type { JwtContext } from '../../src/jwt.js';
import { freePort } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { attemptUpgrade, openRaw, upgradeRefusal } from '../support/sockets.js';
import {
  AUDIENCE,
  ISSUER,
  SECRET,
  now,
  signHs256,
  signWith,
  signingKey,
  unsecured,
  validClaims,
} from './jwt-fixtures.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** A `ws` WebSocket that sends `Authorization: Bearer <token>` on its upgrade. */
function bearerWebSocket(token: string) {
  return class BearerWebSocket extends WebSocket {
    constructor(address: string, protocols?: string | string[], options: WsClientOptions = {}) {
      super(address, protocols, { ...options, headers: { authorization: `Bearer ${token}` } });
    }
  };
}

async function jwtGateway() {
  const auth = jwtAuth({ secret: SECRET, issuer: ISSUER, audience: AUDIENCE });
  const running = await res.gateway<JwtContext>({ ...auth });
  running.gateway.method('whoami', (_params, ctx) => {
    const { user, expiresAt, topics } = ctx.session.context;
    return { user, expiresAt, topics: topics ?? null };
  });
  return running;
}

describe('createGateway({ ...jwtAuth(...) })', () => {
  it('a valid Bearer token on the upgrade: the claims are the session context', async () => {
    const { url } = await jwtGateway();
    const exp = now() + 600;
    const token = await signHs256(validClaims({ sub: 'bob', exp, topics: ['news.*'] }));
    const client = res.client(url, { WebSocket: bearerWebSocket(token) });
    expect(await client.call('whoami')).toEqual({
      user: 'bob',
      expiresAt: exp * 1000,
      topics: ['news.*'],
    });
  });

  it('refuses bad tokens with 401, the reason in the body and in WWW-Authenticate', async () => {
    const { url } = await jwtGateway();
    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
    const refusals = {
      expired: await upgradeRefusal(
        res,
        url,
        undefined,
        bearer(await signHs256(validClaims({ exp: now() - 600 }))),
      ),
      audience: await upgradeRefusal(
        res,
        url,
        undefined,
        bearer(await signHs256(validClaims({ aud: 'x' }))),
      ),
      none: await upgradeRefusal(res, url, undefined, bearer(unsecured())),
      garbage: await upgradeRefusal(res, url, undefined, bearer('garbage')),
      missing: await upgradeRefusal(res, url),
    };
    const summary = Object.fromEntries(
      Object.entries(refusals).map(([name, r]) => [
        name,
        { status: r.status, body: r.body, challenge: r.headers['www-authenticate'] },
      ]),
    );
    const invalid = (reason: string) => ({
      status: 401,
      body: `${reason}\n`,
      challenge: `Bearer error="invalid_token", error_description="${reason}"`,
    });
    expect(summary).toEqual({
      expired: invalid('token expired'),
      audience: invalid('audience mismatch'),
      none: invalid('algorithm not allowed'),
      garbage: invalid('malformed token'),
      missing: { status: 401, body: 'token required\n', challenge: 'Bearer' },
    });
  });

  it('POST /rpc with the Bearer header: answered, or refused with 401', async () => {
    const { httpUrl } = await jwtGateway();
    const post = async (token: string) => {
      const response = await fetch(`${httpUrl}/rpc`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ jsonrpc: '2.0', method: 'whoami', id: 1 }),
      });
      return { status: response.status, body: (await response.text()).trim() };
    };
    const ok = await post(await signHs256());
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body)).toMatchObject({ result: { user: 'alice' } });
    expect(await post(await signHs256(validClaims({ iss: 'https://evil.example.com' })))).toEqual({
      status: 401,
      body: 'issuer mismatch',
    });
  });

  it('a key set that cannot be fetched: 503 with Retry-After; an HS256 token is refused before it is needed', async () => {
    const auth = jwtAuth({ jwksUrl: `http://127.0.0.1:${await freePort()}/jwks.json` });
    const { url } = await res.gateway<JwtContext>({ ...auth });
    const outcome = async (token: string) => {
      const r = await upgradeRefusal(res, url, undefined, { authorization: `Bearer ${token}` });
      return { status: r.status, body: r.body, retryAfter: r.headers['retry-after'] };
    };
    expect(await outcome(await signWith(await signingKey('ES256', 'k')))).toEqual({
      status: 503,
      body: 'key set unavailable: unreachable (ECONNREFUSED)\n',
      retryAfter: '5',
    });
    expect(await outcome(await signHs256())).toEqual({
      status: 401,
      body: 'algorithm not allowed\n',
      retryAfter: undefined,
    });
    expect(await attemptUpgrade(res, url)).toBe(401);
  });
  it('in-band: rpc.authenticate with a refused token, then a good one; methods from its claims', async () => {
    const auth = jwtAuth({ secret: SECRET, issuer: ISSUER, audience: AUDIENCE });
    const { gateway, url } = await res.gateway<JwtContext>({
      ...auth,
      identity: { ...auth.identity, inBand: true },
    });
    gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
    gateway.method('orders.cancel', () => 'cancelled');
    const raw = await openRaw(res, url);

    const expired = await raw.request('rpc.authenticate', {
      token: await signHs256(validClaims({ exp: now() - 600 })),
    });
    expect(expired.error).toMatchObject({
      code: -32010,
      message: 'token expired',
      data: { reason: 'expired' },
    });
    const forged = await raw.request('rpc.authenticate', { token: unsecured() });
    expect(forged.error).toMatchObject({
      code: -32010,
      message: 'algorithm not allowed',
      data: { reason: 'invalid' },
    });

    const exp = now() + 600;
    const token = await signHs256(validClaims({ exp, methods: ['whoami', 'orders.list'] }));
    const accepted = await raw.request('rpc.authenticate', { token });
    expect(accepted.result).toEqual({
      sessionId: expect.any(String),
      user: 'alice',
      expiresAt: (exp + jwtDefaults.clockToleranceSec) * 1000,
    });
    expect((await raw.request('whoami')).result).toBe('alice');
    expect((await raw.request('orders.cancel')).error).toMatchObject({ code: -32004 });
  });
});

describe('jwtAuth with in-band authentication', () => {
  /** A `ws` WebSocket whose upgrade carries `headers` and offers `extra` subprotocols. */
  function socketWith(extra: string[], headers: Record<string, string> = {}) {
    return class OfferingWebSocket extends WebSocket {
      constructor(address: string, protocols?: string | string[], options: WsClientOptions = {}) {
        super(address, [...[protocols ?? []].flat(), ...extra], { ...options, headers });
      }
    };
  }

  it('a token in a configured subprotocol or cookie is read at the upgrade; no token is accepted to authenticate in-band', async () => {
    const auth = jwtAuth({
      secret: SECRET,
      issuer: ISSUER,
      audience: AUDIENCE,
      protocolPrefix: 'token.',
      cookie: 'jwt',
    });
    const { gateway, url } = await res.gateway<JwtContext>({
      ...auth,
      identity: { ...auth.identity, inBand: true },
    });
    gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
    const token = await signHs256(validClaims({}));
    const offered = res.client(url, { WebSocket: socketWith([`token.${token}`]) });
    expect(await offered.call('whoami')).toBe('alice');
    const cookie = res.client(url, { WebSocket: socketWith([], { cookie: `jwt=${token}` }) });
    expect(await cookie.call('whoami')).toBe('alice');
    const none = await openRaw(res, url);
    expect((await none.request('whoami')).error).toMatchObject({ code: -32010 });
  });
});

describe('jwtAuth and revocation', () => {
  it('a token whose iat is ahead of the clock does not pass for one issued after a revocation', async () => {
    const { url, gateway } = await jwtGateway();
    // Signed before the revocation by an issuer whose clock is an hour ahead (or that sets iat
    // as it likes): its iat names a time after the revocation.
    const ahead = await signHs256(validClaims({ iat: now() + 3_600, exp: now() + 7_200 }));
    await gateway.revokeUser('alice');
    const outcome = await attemptUpgrade(res, url, {
      headers: { authorization: `Bearer ${ahead}` },
    });
    expect(outcome).toBe(401);
    // Within the clock tolerance it is taken as it is: issued now, after the revocation.
    const fresh = await signHs256(validClaims({ iat: now() + 2 }));
    const client = res.client(url, { WebSocket: bearerWebSocket(fresh) });
    expect(await client.call('whoami')).toMatchObject({ user: 'alice' });
  });
});

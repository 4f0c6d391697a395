import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { UpgradeRejection } from '../../src/index.js';
import type { UpgradeRequest, WebSocketConstructor } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { deferred } from '../support/promises.js';
import { upgradeRefusal } from '../support/sockets.js';
import { waitForState } from '../support/client.js';

const res = new Resources();
afterEach(() => res.cleanup());

interface User {
  user: string;
  via: string;
}

/** A `ws` client class that sends a Cookie header, as a browser would. */
function withCookie(cookie: string): WebSocketConstructor {
  return class CookieWebSocket extends WebSocket {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols, { headers: { cookie } });
    }
  };
}

/** Accepts a token from the query string, a cookie or a subprotocol `token.<value>`. */
function authenticate({ query, cookies, protocols }: UpgradeRequest): User {
  const fromQuery = query.get('token');
  if (fromQuery) return check(fromQuery, 'query');
  if (cookies['token']) return check(cookies['token'], 'cookie');
  const fromProtocol = protocols.find((p) => p.startsWith('token.'));
  if (fromProtocol) return check(fromProtocol.slice('token.'.length), 'protocol');
  throw new UpgradeRejection(401, 'Token required', { 'WWW-Authenticate': 'Bearer' });
}

function check(token: string, via: string): User {
  if (token === 'alice-secret') return { user: 'alice', via };
  if (token === 'bob-secret') return { user: 'bob', via };
  throw new UpgradeRejection(403, 'Bad token');
}

async function authGateway() {
  const running = await res.gateway<User>({ authenticate });
  running.gateway.method('whoami', (_params, ctx) => ctx.session.context);
  return running;
}

describe('authenticate hook', () => {
  it('makes the accepted context visible to handlers as ctx.session.context', async () => {
    const { url, gateway } = await authGateway();
    const alice = res.client(`${url}?token=alice-secret`);
    const bob = res.client(url, { WebSocket: withCookie('token=bob-secret') });
    const carol = res.client(url, { protocols: ['jsonrpc', 'token.alice-secret'] });

    expect(await alice.call('whoami')).toEqual({ user: 'alice', via: 'query' });
    expect(await bob.call('whoami')).toEqual({ user: 'bob', via: 'cookie' });
    expect(await carol.call('whoami')).toEqual({ user: 'alice', via: 'protocol' });
    expect([...gateway.sessions.values()].map((s) => s.context.user).sort()).toEqual([
      'alice',
      'alice',
      'bob',
    ]);
  });

  it('refuses with the status of UpgradeRejection: a raw ws sees unexpected-response 401', async () => {
    const { url, gateway } = await authGateway();
    const refused = await upgradeRefusal(res, url);
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toBe('Bearer');
    expect(refused.body).toBe('Token required\n');

    const forbidden = await upgradeRefusal(res, `${url}?token=wrong`);
    expect(forbidden.status).toBe(403);
    expect(forbidden.body).toBe('Bad token\n');
    expect(gateway.sessions.size).toBe(0);
  });

  it('a refused raw ws with no unexpected-response listener gets an error naming the status', async () => {
    const { url } = await authGateway();
    const socket = res.track(new WebSocket(url));
    const error = await new Promise<Error>((resolve) => socket.once('error', resolve));
    expect(error.message).toContain('401');
  });

  it('shows the hook the query string, cookies, offered subprotocols and remote address', async () => {
    const seen: UpgradeRequest[] = [];
    const { url } = await res.gateway({
      authenticate: (request) => {
        seen.push(request);
        return { ok: true };
      },
    });
    const socket = res.track(
      new WebSocket(`${url}?token=t%201&room=42`, ['jsonrpc.v2', 'token.abc'], {
        headers: { cookie: 'sid=a%20b; theme=dark; flag' },
      }),
    );
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });

    expect(seen).toHaveLength(1);
    const request = seen[0]!;
    expect(request.query.get('token')).toBe('t 1');
    expect(request.query.get('room')).toBe('42');
    expect(request.url.pathname).toBe('/rpc');
    expect({ ...request.cookies }).toEqual({ sid: 'a b', theme: 'dark' });
    expect(request.protocols).toEqual(['jsonrpc.v2', 'token.abc']);
    expect(request.remoteAddress).toBe('127.0.0.1');
    // By default the gateway answers with the first offered subprotocol.
    expect(socket.protocol).toBe('jsonrpc.v2');
  });

  it('selectProtocol picks the subprotocol the gateway answers with', async () => {
    const { url } = await res.gateway({
      selectProtocol: (offered) => offered.find((p) => p === 'jsonrpc.v2') ?? false,
    });
    const socket = res.track(new WebSocket(url, ['token.abc', 'jsonrpc.v2']));
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    expect(socket.protocol).toBe('jsonrpc.v2');
  });

  it('an async hook may accept or refuse', async () => {
    const { url, gateway } = await res.gateway<string>({
      authenticate: async ({ query }) => {
        await new Promise((r) => setImmediate(r));
        if (query.get('ok') !== '1')
          throw new UpgradeRejection(429, 'Slow down', { 'Retry-After': '5' });
        return 'async-user';
      },
    });
    gateway.method('whoami', (_p, ctx) => ctx.session.context);
    const refused = await upgradeRefusal(res, url);
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('5');
    const client = res.client(`${url}?ok=1`);
    expect(await client.call('whoami')).toBe('async-user');
  });

  it('a hook that throws something else refuses with 500', async () => {
    const { url } = await res.gateway({
      authenticate: () => {
        throw new Error('database down');
      },
    });
    const refused = await upgradeRefusal(res, url);
    expect(refused.status).toBe(500);
    expect(refused.body).not.toContain('database');
  });

  it('an RpcClient refused by the hook keeps trying and gets in once the hook accepts', async () => {
    let open = false;
    let refusals = 0;
    const refusedTwice = deferred();
    const { url, gateway } = await res.gateway({
      authenticate: () => {
        if (!open) {
          if (++refusals === 2) refusedTwice.resolve();
          throw new UpgradeRejection(503);
        }
        return 'late';
      },
    });
    gateway.method('whoami', (_p, ctx) => ctx.session.context);
    const client = res.client(url);
    await refusedTwice.promise;
    expect(client.state).toBe('connecting');
    open = true;
    await waitForState(client, 'open');
    expect(await client.call('whoami')).toBe('late');
  });
});

/**
 * The `user` a connect hook answers goes out on every upstream request as X-Wsrpc-User, so it must
 * be one a header can carry: well-formed Unicode (encodeURIComponent throws on a lone surrogate)
 * of at most MAX_HOOK_USER_BYTES of UTF-8. Any other is a malformed result: the hook failed, and
 * onFailure decides (refuse: 503; allow: in, anonymous). The subscribe hook, given a user it
 * cannot encode by an identity other than the connect hook's, fails the same way, by onFailure.
 */
import fc from 'fast-check';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { noTracing } from '../../src/tracing/index.js';
import { MAX_USER_HEADER_BYTES } from '../../src/upstream/identity-headers.js';
import { MAX_HOOK_USER_BYTES, readConnectResult } from '../../src/upstream-hooks/hook-answers.js';
import { resolveHooksConfig, upstreamHooks } from '../../src/upstream-hooks/index.js';
import type { HookIdentity } from '../../src/upstream-hooks/index.js';
import { newSession, sessionIds, startGateway } from '../support/gateway.js';
import { openRawRpc } from '../server/raw-rpc.js';
import { startHookUpstream } from './hook-upstream.js';
import type { HookUpstream } from './hook-upstream.js';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The users the connect hook answers, by the `?as=` of the upgrade. */
const USERS: Record<string, string> = {
  ann: 'ann',
  lone: 'x\ud800y',
  longest: 'a'.repeat(MAX_HOOK_USER_BYTES),
  long: 'a'.repeat(MAX_HOOK_USER_BYTES + 1),
  // Fewer characters than the bound, more bytes of UTF-8 (3 each).
  euros: '€'.repeat(Math.floor(MAX_HOOK_USER_BYTES / 3) + 1),
};

async function upstream(): Promise<HookUpstream> {
  const started = await startHookUpstream();
  cleanups.push(() => started.stop().catch(() => undefined));
  started.answer('wsrpc.connect', (params) => {
    const as = (params['query'] as Record<string, string>)['as']!;
    return { result: { context: { as }, user: USERS[as] } };
  });
  started.answer('wsrpc.subscribe', { result: { allow: true } });
  return started;
}

async function gatewayWithHooks(
  url: string,
  section: Record<string, unknown>,
  options: GatewayOptions<HookIdentity> = {},
) {
  const config = resolveHooksConfig({
    upstreams: { auth: { url, timeoutMs: 2_000 } },
    hooks: section,
  });
  const hooks = upstreamHooks(config, { logger: silentLogger, tracing: noTracing });
  const running = await startGateway<HookIdentity>({
    authenticate: hooks.authenticate,
    userOf: hooks.userOf,
    ...options,
    identity: { ...hooks.identity, ...options.identity },
  });
  hooks.attach(running.gateway);
  running.gateway.topic('private.*', { authorize: hooks.authorizeTopic });
  cleanups.push(() => running.gateway.close());
  cleanups.push(() => hooks.close());
  return running;
}

/** The upgrade's status: 101 when let in. */
function upgradeStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    socket.once('open', () => {
      socket.close();
      resolve(101);
    });
    socket.once('unexpected-response', (_req, res) => {
      res.resume();
      resolve(res.statusCode!);
    });
    socket.once('error', reject);
  });
}

describe("a connect hook's user", () => {
  it('is refused as a malformed result when not well-formed or over the bound (onFailure: refuse)', async () => {
    const auth = await upstream();
    const { url, gateway } = await gatewayWithHooks(auth.url, { connect: { upstream: 'auth' } });
    const statuses: Record<string, number> = {};
    for (const as of Object.keys(USERS)) statuses[as] = await upgradeStatus(`${url}?as=${as}`);
    expect(statuses).toEqual({ ann: 101, lone: 503, longest: 101, long: 503, euros: 503 });
    // The longest user accepted is carried whole.
    const before = sessionIds(gateway);
    const rpc = await openRawRpc(`${url}?as=longest`);
    cleanups.push(() => rpc.close());
    expect(gateway.config.auth.userOf?.(newSession(gateway, before).context)).toBe(
      USERS['longest'],
    );
  });

  it('leaves the client in anonymous with onFailure: allow, and its subscribes hooked without a user', async () => {
    const auth = await upstream();
    const { url, gateway } = await gatewayWithHooks(auth.url, {
      connect: { upstream: 'auth', onFailure: 'allow' },
      subscribe: { upstream: 'auth', topics: ['private.*'] },
    });
    const before = sessionIds(gateway);
    const rpc = await openRawRpc(`${url}?as=lone`);
    cleanups.push(() => rpc.close());
    expect(newSession(gateway, before).context).toEqual({ context: null, anonymous: true });
    const subscribed = await rpc.request('subscribe', { topic: 'private.x' });
    expect(subscribed.error).toBeUndefined();
    const [asked] = auth.of('wsrpc.subscribe');
    expect(asked!.params['user']).toBeNull();
    expect(asked!.headers['x-wsrpc-user']).toBeUndefined();
  });

  it('is accepted exactly when a header can carry it: non-empty, encodable, at most the bound', () => {
    // Units that make strings of every kind: ASCII, 2-, 3- and 4-byte characters, and lone
    // surrogates of both halves; repeated, so lengths reach past the bound.
    const unit = fc.oneof(
      fc.constantFrom('a', 'é', '€', '😀', '\ud800', '\udfff'),
      fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
    );
    const user = fc
      .tuple(fc.array(unit, { maxLength: 8 }), fc.nat({ max: MAX_HOOK_USER_BYTES }))
      .map(([units, times]) =>
        units.join('').repeat(units.length > 0 ? Math.ceil(times / units.length) : 0),
      );
    fc.assert(
      fc.property(user, (name) => {
        let encoded: string | undefined;
        try {
          encoded = encodeURIComponent(name);
        } catch {
          encoded = undefined;
        }
        const carried =
          name !== '' &&
          encoded !== undefined &&
          Buffer.byteLength(name, 'utf8') <= MAX_HOOK_USER_BYTES;
        const read = readConnectResult({ context: null, user: name });
        expect(typeof read !== 'string').toBe(carried);
        if (typeof read !== 'string') expect(decodeURIComponent(encoded!)).toBe(read.user);
      }),
      { numRuns: 500 },
    );
  });
});

describe('the subscribe hook, given a user it cannot encode', () => {
  const loneUser: GatewayOptions<HookIdentity> = {
    authenticate: () => ({ context: null }),
    userOf: () => 'x\ud800',
  };

  it('fails by onFailure: refuse answers -32004', async () => {
    const auth = await upstream();
    const { url } = await gatewayWithHooks(
      auth.url,
      { subscribe: { upstream: 'auth', topics: ['private.*'] } },
      loneUser,
    );
    const rpc = await openRawRpc(url);
    cleanups.push(() => rpc.close());
    const refused = await rpc.request('subscribe', { topic: 'private.x' });
    expect(refused.error).toMatchObject({ code: -32004, data: { topic: 'private.x' } });
    expect(auth.of('wsrpc.subscribe')).toEqual([]);
  });

  it('fails by onFailure: allow lets the subscribe through', async () => {
    const auth = await upstream();
    const { url } = await gatewayWithHooks(
      auth.url,
      { subscribe: { upstream: 'auth', topics: ['private.*'], onFailure: 'allow' } },
      loneUser,
    );
    const rpc = await openRawRpc(url);
    cleanups.push(() => rpc.close());
    const allowed = await rpc.request('subscribe', { topic: 'private.x' });
    expect(allowed.error).toBeUndefined();
    expect(typeof allowed.result).toBe('string');
  });
});

describe('the subscribe hook, given a user longer than X-Wsrpc-User carries', () => {
  it('fails by onFailure without asking the upstream: refuse answers -32004', async () => {
    const auth = await upstream();
    const { url } = await gatewayWithHooks(
      auth.url,
      { subscribe: { upstream: 'auth', topics: ['private.*'] } },
      {
        authenticate: () => ({ context: null }),
        // From an identity other than the connect hook's (which caps its users at 1 KiB).
        userOf: () => 'a'.repeat(MAX_USER_HEADER_BYTES + 1),
      },
    );
    const rpc = await openRawRpc(url);
    cleanups.push(() => rpc.close());
    const refused = await rpc.request('subscribe', { topic: 'private.x' });
    expect(refused.error).toMatchObject({ code: -32004, data: { topic: 'private.x' } });
    expect(auth.of('wsrpc.subscribe')).toEqual([]);
  });

  it('a user at the bound is sent', async () => {
    const auth = await upstream();
    auth.answer('wsrpc.subscribe', () => ({ result: { allow: true } }));
    const { url } = await gatewayWithHooks(
      auth.url,
      { subscribe: { upstream: 'auth', topics: ['private.*'] } },
      { authenticate: () => ({ context: null }), userOf: () => 'a'.repeat(MAX_USER_HEADER_BYTES) },
    );
    const rpc = await openRawRpc(url);
    cleanups.push(() => rpc.close());
    const allowed = await rpc.request('subscribe', { topic: 'private.x' });
    expect(allowed.error).toBeUndefined();
    expect(auth.of('wsrpc.subscribe')).toHaveLength(1);
  });
});

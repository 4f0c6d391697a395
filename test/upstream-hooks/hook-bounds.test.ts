// The hooks' share of their upstream per client: connect hook calls per client address
// (maxConcurrentPerAddress, past it 429 with Retry-After for that address alone) and subscribe
// hook calls per session (maxConcurrentPerSession in flight, maxQueuedPerSession waiting, past
// that -32013 for that session alone). One client cannot take the upstream's maxConcurrent and
// so refuse everyone else. The upstream holds each request until the test releases it.
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { noTracing } from '../../src/tracing/index.js';
import { resolveHooksConfig, upstreamHooks } from '../../src/upstream-hooks/index.js';
import type { HookIdentity } from '../../src/upstream-hooks/index.js';
import { startGateway } from '../support/gateway.js';
import { waitFor } from '../support/waiting.js';
import { openRawRpc } from '../server/raw-rpc.js';
import type { RawReply, RawRpc } from '../server/raw-rpc.js';
import { heldUpstreamIn } from '../upstream/held-upstream.js';
import type { HeldRequest, HeldUpstream } from '../upstream/held-upstream.js';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Every hook call allowed: connect with a user, subscribe with `allow: true`. */
const allow = (request: HeldRequest): unknown =>
  request.method === 'wsrpc.connect' ? { context: {}, user: 'u' } : { allow: true };

const heldUpstream = (): Promise<HeldUpstream> => heldUpstreamIn(cleanups, allow);

/** A gateway whose hooks of `section` call `auth` at `url` (maxConcurrent 16). */
async function gatewayWithHooks(url: string, section: Record<string, unknown>) {
  const config = resolveHooksConfig({
    upstreams: { auth: { url, maxConcurrent: 16, timeoutMs: 60_000 } },
    hooks: section,
  });
  const hooks = upstreamHooks(config, { logger: silentLogger, tracing: noTracing });
  const running = await startGateway<HookIdentity>({
    ...(hooks.authenticate ? { authenticate: hooks.authenticate, userOf: hooks.userOf } : {}),
    ...(hooks.identity ? { identity: hooks.identity } : {}),
  });
  hooks.attach(running.gateway);
  running.gateway.topic('private.*', { authorize: hooks.authorizeTopic });
  cleanups.push(() => running.gateway.close());
  cleanups.push(() => hooks.close());
  return running;
}

interface Upgrade {
  status: number;
  retryAfter: string | undefined;
  socket: WebSocket | undefined;
}

/** An upgrade from the loopback address `from`: 101 with its socket, or the refusal's status. */
function upgrade(url: string, from: string): Promise<Upgrade> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { localAddress: from });
    cleanups.push(() => socket.terminate());
    socket.once('open', () => resolve({ status: 101, retryAfter: undefined, socket }));
    socket.once('unexpected-response', (_req, res) => {
      res.resume();
      const retryAfter = res.headers['retry-after'];
      resolve({ status: res.statusCode!, retryAfter, socket: undefined });
    });
    socket.once('error', reject);
  });
}

const connectsFrom = (upstream: HeldUpstream, address: string) =>
  upstream.held.filter((r) => r.method === 'wsrpc.connect' && r.params['remoteAddress'] === address)
    .length;

describe('the connect hook per client address', () => {
  it('past maxConcurrentPerAddress an address is refused 429 with Retry-After, while another address still gets in', async () => {
    const auth = await heldUpstream();
    // maxConcurrentPerAddress by default: max(1, floor(16 / 8)) = 2.
    const { url } = await gatewayWithHooks(auth.url, { connect: { upstream: 'auth' } });
    const first = [upgrade(url, '127.0.0.1'), upgrade(url, '127.0.0.1')];
    await waitFor(() => connectsFrom(auth, '127.0.0.1') === 2, 'two connects to be asked');
    expect(await upgrade(url, '127.0.0.1')).toMatchObject({ status: 429, retryAfter: '1' });

    const other = upgrade(url, '127.0.0.2');
    await waitFor(() => connectsFrom(auth, '127.0.0.2') === 1, 'the other address to be asked');
    auth.release();
    expect((await other).status).toBe(101);
    for (const admitted of await Promise.all(first)) expect(admitted.status).toBe(101);

    // Answered connects give the address its share back.
    const again = upgrade(url, '127.0.0.1');
    await waitFor(() => connectsFrom(auth, '127.0.0.1') === 1, 'the next connect to be asked');
    auth.release();
    expect((await again).status).toBe(101);
  });

  it("addresses at their full share are refused (429) the upstream's last slots, which go to addresses with no connect in progress", async () => {
    const auth = await heldUpstream();
    // maxConcurrent 16: 2 an address, the last 2 kept (reservedForNewCallers: floor(16 / 8)).
    const { url } = await gatewayWithHooks(auth.url, { connect: { upstream: 'auth' } });
    const held: Promise<Upgrade>[] = [];
    for (let n = 10; n < 17; n++) {
      held.push(upgrade(url, `127.0.0.${n}`), upgrade(url, `127.0.0.${n}`));
      await waitFor(() => connectsFrom(auth, `127.0.0.${n}`) === 2, `127.0.0.${n} to hold 2`);
    }
    // 14 in progress: an address with one of its own gets no more, within its share or not.
    held.push(upgrade(url, '127.0.0.17'));
    await waitFor(() => connectsFrom(auth, '127.0.0.17') === 1, 'a new address to be asked');
    expect(await upgrade(url, '127.0.0.17')).toMatchObject({ status: 429, retryAfter: '1' });
    held.push(upgrade(url, '127.0.0.18'));
    await waitFor(() => connectsFrom(auth, '127.0.0.18') === 1, 'another new address to be asked');
    auth.release();
    for (const admitted of await Promise.all(held)) expect(admitted.status).toBe(101);
  });

  it('an explicit maxConcurrentPerAddress of 1 admits one connect per address at a time', async () => {
    const auth = await heldUpstream();
    const { url } = await gatewayWithHooks(auth.url, {
      connect: { upstream: 'auth', maxConcurrentPerAddress: 1 },
    });
    const first = upgrade(url, '127.0.0.3');
    await waitFor(() => connectsFrom(auth, '127.0.0.3') === 1, 'the connect to be asked');
    expect((await upgrade(url, '127.0.0.3')).status).toBe(429);
    auth.release();
    expect((await first).status).toBe(101);
  });
});

async function session(url: string): Promise<RawRpc> {
  const rpc = await openRawRpc(url);
  cleanups.push(() => rpc.close());
  return rpc;
}

const subscribesOf = (upstream: HeldUpstream, sessionId: string) =>
  upstream.held.filter((r) => r.method === 'wsrpc.subscribe' && r.params['sessionId'] === sessionId)
    .length;

/** The id of the session whose subscribe asked for `topic`. */
function sessionAsking(upstream: HeldUpstream, topic: string): string {
  const request = upstream.received.find((r) => r.params['topic'] === topic);
  return request!.params['sessionId'] as string;
}

describe('the subscribe hook per session', () => {
  it("keeps maxConcurrentPerSession of a session's calls in flight, queues maxQueuedPerSession, refuses the next -32013; another session is still asked", async () => {
    const auth = await heldUpstream();
    const { url, gateway } = await gatewayWithHooks(auth.url, {
      subscribe: {
        upstream: 'auth',
        topics: ['private.*'],
        maxConcurrentPerSession: 2,
        maxQueuedPerSession: 2,
      },
    });
    const alice = await session(url);
    const bob = await session(url);
    const admitted = [0, 1, 2, 3].map((i) => alice.request('subscribe', [`private.a${i}`]));
    await waitFor(() => auth.held.length === 2, "two of alice's subscribes to be asked");
    const aliceId = sessionAsking(auth, 'private.a0');
    const refused: RawReply = await alice.request('subscribe', ['private.a4']);
    expect(refused.error).toMatchObject({
      code: -32013,
      data: { upstream: 'auth', bound: 'maxQueuedPerSession', limit: 2 },
    });

    const bobs = bob.request('subscribe', ['private.b']);
    await waitFor(() => auth.received.some((r) => r.params['topic'] === 'private.b'), 'bob');
    expect(subscribesOf(auth, aliceId)).toBe(2);

    // Each release lets the queued ones go, never more than two of alice's at once.
    let answered = 0;
    void Promise.all(admitted).then(() => (answered = 1));
    while (answered === 0) {
      expect(subscribesOf(auth, aliceId)).toBeLessThanOrEqual(2);
      auth.release();
      await waitFor(() => auth.held.length > 0 || answered === 1, 'the next subscribes');
    }
    for (const reply of await Promise.all(admitted)) expect(typeof reply.result).toBe('string');
    expect(typeof (await bobs).result).toBe('string');
    expect(auth.received.filter((r) => r.method === 'wsrpc.subscribe')).toHaveLength(5);
    expect(gateway.sessions.size).toBe(2);
  });

  it("a closed session's queued subscribes are never sent", async () => {
    const auth = await heldUpstream();
    const { url, gateway } = await gatewayWithHooks(auth.url, {
      subscribe: { upstream: 'auth', topics: ['private.*'], maxConcurrentPerSession: 1 },
    });
    const alice = await session(url);
    for (let i = 0; i < 3; i++) void alice.request('subscribe', [`private.a${i}`]);
    await waitFor(() => auth.held.length === 1, "alice's first subscribe to be asked");
    alice.close();
    await waitFor(() => gateway.sessions.size === 0, 'her session to close');
    auth.release();
    const bob = await session(url);
    const bobs = bob.request('subscribe', ['private.b']);
    await waitFor(() => auth.held.length === 1, "bob's subscribe to be asked");
    auth.release();
    expect(typeof (await bobs).result).toBe('string');
    expect(auth.received.map((r) => r.params['topic'])).toEqual(['private.a0', 'private.b']);
  });
});

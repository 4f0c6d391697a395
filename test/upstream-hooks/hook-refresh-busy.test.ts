// A refresh (rpc.authenticate on an open connection) weighs each topic subscription again
// through the subscribe hook. Those checks wait for the hook's shares (the session's, its
// address's) instead of being refused -32013: a busy hook never ends a subscription the new
// context still allows. Connections come from loopback addresses of their own (every 127/8
// address is loopback on Linux).
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { noTracing } from '../../src/tracing/index.js';
import { resolveHooksConfig, upstreamHooks } from '../../src/upstream-hooks/index.js';
import type { RawReply } from '../server/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { openSocket } from '../support/sockets.js';
import { waitFor } from '../support/waiting.js';
import { heldUpstreamIn } from '../upstream/held-upstream.js';
import type { HeldUpstream } from '../upstream/held-upstream.js';

const res = new Resources();
const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  await res.cleanup();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const heldUpstream = (): Promise<HeldUpstream> => heldUpstreamIn(cleanups, () => ({ allow: true }));

/**
 * A gateway whose `private.*` topics the subscribe hook decides, calling `auth` at `url`; any
 * token authenticates (locally), so `rpc.authenticate` on an open connection is a refresh.
 */
async function gatewayWithHook(
  url: string,
  subscribe: Record<string, unknown>,
  maxSubscriptions = 100,
) {
  const config = resolveHooksConfig({
    upstreams: { auth: { url, maxConcurrent: 16, timeoutMs: 60_000 } },
    hooks: { subscribe: { upstream: 'auth', topics: ['private.*'], ...subscribe } },
  });
  const hooks = upstreamHooks(config, { logger: silentLogger, tracing: noTracing });
  const running = await res.gateway({
    authenticate: () => ({}),
    identity: { inBand: false },
    limits: { maxSubscriptions },
  });
  hooks.attach(running.gateway);
  running.gateway.topic('private.*', { authorize: hooks.authorizeTopic });
  cleanups.push(() => hooks.close());
  return running;
}

interface Client {
  call(method: string, params: unknown): Promise<RawReply>;
  /** Stream-end error frames received (a subscription the gateway ended). */
  readonly ended: unknown[];
  /** Subscriptions (ids) a message was delivered to. */
  readonly delivered: string[];
}

/** A connection from the loopback address `from`. */
async function connectFrom(url: string, from: string): Promise<Client> {
  const socket = await openSocket(res, url, undefined, { localAddress: from });
  const pending = new Map<number, (reply: RawReply) => void>();
  const ended: unknown[] = [];
  const delivered: string[] = [];
  socket.on('message', (data) => {
    const frame = JSON.parse((data as Buffer).toString('utf8')) as RawReply & {
      method?: string;
      params?: { error?: unknown; subscription?: string; result?: unknown };
    };
    if (frame.method !== undefined) {
      if (frame.params?.error !== undefined) ended.push(frame.params.error);
      if (frame.params?.result !== undefined) delivered.push(String(frame.params.subscription));
      return;
    }
    pending.get(frame.id)?.(frame);
    pending.delete(frame.id);
  });
  let nextId = 1;
  return {
    ended,
    delivered,
    call(method, params) {
      const id = nextId++;
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
      return new Promise((resolve) => pending.set(id, resolve));
    },
  };
}

const asked = (upstream: HeldUpstream, prefix: string) =>
  upstream.held.filter((r) => (r.params['topic'] as string).startsWith(prefix)).length;

/** Subscribe `client` to `topics` one by one, the upstream allowing each. */
async function subscribeAll(client: Client, auth: HeldUpstream, topics: string[]) {
  for (const topic of topics) {
    const reply = client.call('subscribe', [topic]);
    await waitFor(() => auth.held.length > 0, 'the subscribe to be asked');
    auth.release();
    expect(typeof (await reply).result).toBe('string');
  }
}

/** Release every held call until `done` settles. */
async function answerUntil<T>(auth: HeldUpstream, done: Promise<T>): Promise<T> {
  let settled = false;
  void done.finally(() => (settled = true));
  while (!settled) {
    await waitFor(() => settled || auth.held.length > 0, 'a call to be asked, or the end');
    auth.release();
  }
  return done;
}

describe('the subscribe hook at a refresh', () => {
  it.each(['refuse', 'allow'])(
    "waits for the address's share another session holds, and ends nothing (onFailure %s)",
    async (onFailure) => {
      const auth = await heldUpstream();
      const { url, gateway } = await gatewayWithHook(auth.url, {
        onFailure,
        maxConcurrentPerSession: 4,
        maxConcurrentPerAddress: 4,
      });
      const a = await connectFrom(url, '127.0.0.5');
      const b = await connectFrom(url, '127.0.0.5');
      const topics = ['private.b.1', 'private.b.2', 'private.b.3'];
      await subscribeAll(b, auth, topics);

      const first = [1, 2, 3, 4].map((i) => a.call('subscribe', [`private.a.${i}`]));
      await waitFor(() => asked(auth, 'private.a') === 4, 'session A to hold the address');
      const refresh = b.call('rpc.authenticate', { token: 'new' });
      // A client's own subscribe of B is still refused at once.
      expect((await b.call('subscribe', ['private.b.4'])).error).toMatchObject({
        code: -32013,
        data: { bound: 'maxConcurrentPerAddress' },
      });
      expect(asked(auth, 'private.b')).toBe(0);

      auth.release();
      for (const reply of await Promise.all(first)) expect(typeof reply.result).toBe('string');
      expect((await answerUntil(auth, refresh)).result).toBeDefined();
      const weighed = auth.received.filter((r) => topics.includes(r.params['topic'] as string));
      expect(weighed).toHaveLength(6);
      expect(b.ended).toEqual([]);
      for (const topic of topics) await gateway.publish(topic, 'still here');
      await waitFor(() => b.delivered.length === 3, 'every subscription of B to get its message');
    },
  );

  it('keeps every subscription when a session has more than its hook queue', async () => {
    const auth = await heldUpstream();
    const { url, gateway } = await gatewayWithHook(
      auth.url,
      { onFailure: 'refuse', maxConcurrentPerSession: 1, maxQueuedPerSession: 2 },
      20,
    );
    const b = await connectFrom(url, '127.0.0.6');
    const topics = Array.from({ length: 8 }, (_, i) => `private.q.${i}`);
    await subscribeAll(b, auth, topics);

    const refresh = b.call('rpc.authenticate', { token: 'new' });
    expect((await answerUntil(auth, refresh)).result).toBeDefined();
    expect(auth.received).toHaveLength(16);
    expect(b.ended).toEqual([]);
    for (const topic of topics) await gateway.publish(topic, 'still here');
    await waitFor(() => b.delivered.length === 8, 'every subscription to get its message');
  });
});

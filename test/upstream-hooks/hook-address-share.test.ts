// The subscribe hook's share of its upstream per client address (maxConcurrentPerAddress): one
// address opening several connections, each within its session's share, cannot take the
// upstream's maxConcurrent. Connections come from loopback addresses of their own (every 127/8
// address is loopback on Linux); the upstream holds each request until the test releases it.
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { noTracing } from '../../src/tracing/index.js';
import { resolveHooksConfig, upstreamHooks } from '../../src/upstream-hooks/index.js';
import { Resources } from '../support/resources.js';
import { waitFor } from '../support/waiting.js';
import { clientFrom, heldUpstreamIn } from '../upstream/held-upstream.js';
import type { HeldUpstream } from '../upstream/held-upstream.js';

const res = new Resources();
const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  await res.cleanup();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const heldUpstream = (): Promise<HeldUpstream> => heldUpstreamIn(cleanups, () => ({ allow: true }));

/** A gateway whose `private.*` topics the subscribe hook decides, calling `auth` at `url`. */
async function gatewayWithHook(url: string, subscribe: Record<string, unknown>) {
  const config = resolveHooksConfig({
    upstreams: { auth: { url, maxConcurrent: 16, timeoutMs: 60_000 } },
    hooks: { subscribe: { upstream: 'auth', topics: ['private.*'], ...subscribe } },
  });
  const hooks = upstreamHooks(config, { logger: silentLogger, tracing: noTracing });
  const running = await res.gateway();
  hooks.attach(running.gateway);
  running.gateway.topic('private.*', { authorize: hooks.authorizeTopic });
  cleanups.push(() => hooks.close());
  return running;
}

/** A connection from the loopback address `from`, subscribing to one topic per call. */
async function connectFrom(url: string, from: string) {
  const client = await clientFrom(res, url, from);
  return { subscribe: (topic: string) => client.request('subscribe', [topic]) };
}

const asked = (upstream: HeldUpstream, prefix: string) =>
  upstream.held.filter((r) => (r.params['topic'] as string).startsWith(prefix)).length;

describe('the subscribe hook per client address', () => {
  it('connections from one address together past maxConcurrentPerAddress are refused -32013, while another address is still asked', async () => {
    const auth = await heldUpstream();
    const { url } = await gatewayWithHook(auth.url, {
      maxConcurrentPerSession: 2,
      maxConcurrentPerAddress: 3,
    });
    const a1 = await connectFrom(url, '127.0.0.2');
    const a2 = await connectFrom(url, '127.0.0.2');
    const a3 = await connectFrom(url, '127.0.0.2');
    const b = await connectFrom(url, '127.0.0.3');
    const first = [
      a1.subscribe('private.a1.0'),
      a1.subscribe('private.a1.1'),
      a2.subscribe('private.a2.0'),
    ];
    await waitFor(() => asked(auth, 'private.a') === 3, 'the address to hold three');
    // A third session of the address, with no hook call of its own to wait for, is refused.
    const refused = await a3.subscribe('private.a3.0');
    expect(refused.error).toMatchObject({
      code: -32013,
      data: { upstream: 'auth', bound: 'maxConcurrentPerAddress', limit: 3 },
    });
    // A session of the address with a call in flight, within its own share, waits for that call.
    const queued = a2.subscribe('private.a2.1');
    const bs = [b.subscribe('private.b.0'), b.subscribe('private.b.1')];
    await waitFor(() => asked(auth, 'private.b') === 2, 'the other address to be asked');
    expect(asked(auth, 'private.a')).toBe(3);

    auth.release((r) => r.params['topic'] !== 'private.a2.0');
    for (const reply of await Promise.all([...first.slice(0, 2), ...bs])) {
      expect(typeof reply.result).toBe('string');
    }
    // a1's calls ended, yet a2's second one still waits its own first.
    expect(asked(auth, 'private.a2.1')).toBe(0);
    auth.release();
    expect(typeof (await first[2]!).result).toBe('string');
    await waitFor(() => asked(auth, 'private.a2.1') === 1, "a2's queued subscribe to be asked");
    auth.release();
    expect(typeof (await queued).result).toBe('string');

    // Answered calls give the address its share back.
    const again = a3.subscribe('private.a3.1');
    await waitFor(() => asked(auth, 'private.a3') === 1, "a3's subscribe to be asked");
    auth.release();
    expect(typeof (await again).result).toBe('string');
    expect(auth.received.map((r) => r.params['topic'])).not.toContain('private.a3.0');
  });

  it('by default an address holds a quarter of the upstream, at least the session share', async () => {
    const auth = await heldUpstream();
    // max(2, floor(16 / 4)) = 4.
    const { url } = await gatewayWithHook(auth.url, { maxConcurrentPerSession: 2 });
    const sessions = await Promise.all([0, 1, 2].map(() => connectFrom(url, '127.0.0.4')));
    const first = [0, 1].flatMap((s) =>
      [0, 1].map((i) => sessions[s]!.subscribe(`private.s${s}.${i}`)),
    );
    await waitFor(() => asked(auth, 'private.s') === 4, 'the address to hold four');
    expect((await sessions[2]!.subscribe('private.s2.0')).error).toMatchObject({
      code: -32013,
      data: { bound: 'maxConcurrentPerAddress', limit: 4 },
    });
    auth.release();
    for (const reply of await Promise.all(first)) expect(typeof reply.result).toBe('string');
  });
});

// Each session's share of an upstream (maxConcurrentPerSession): one connection with many calls
// in flight cannot take the slots every client shares (maxConcurrent). The upstream holds each
// request until the test releases it, so what it holds is the gateway's calls in flight.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openRawRpc } from '../server/raw-rpc.js';
import type { RawRpc } from '../server/raw-rpc.js';
import { waitFor } from '../support/waiting.js';
import { expectUpstreamBusy, heldFor as heldOf, startHeldUpstream } from './held-upstream.js';
import type { HeldUpstream } from './held-upstream.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

let upstream: HeldUpstream;
let running: RoutedGateway;
const opened: RawRpc[] = [];

beforeAll(async () => {
  upstream = await startHeldUpstream();
  const url = upstream.url;
  running = await startRoutedGateway({
    upstreams: {
      // maxConcurrentPerSession by default: max(1, floor(16 / 8)) = 2.
      wide: { url, maxConcurrent: 16 },
      shared: { url, maxConcurrent: 4, maxConcurrentPerSession: 2, maxConcurrentPerAddress: 4 },
      retrying: { url, maxConcurrent: 16, maxConcurrentPerSession: 1, retries: 3 },
    },
    methods: {
      'wide.*': 'wide',
      'shared.*': 'shared',
      'idem.*': { upstream: 'retrying', idempotent: true },
      'plain.*': 'retrying',
    },
  });
});

afterEach(async () => {
  upstream.release();
  for (const rpc of opened.splice(0)) rpc.close();
  await waitFor(() => running.gateway.sessions.size === 0, 'the sessions to close');
  for (const endpoint of running.routes.upstreams.values()) {
    await waitFor(() => endpoint.inFlight === 0, `${endpoint.name} to hold no call`);
  }
});

afterAll(async () => {
  await running?.close();
  await upstream?.stop();
});

async function session(user: string): Promise<RawRpc> {
  const rpc = await openRawRpc(`${running.url}?user=${user}`);
  opened.push(rpc);
  return rpc;
}

/** Held requests sent for `user` (X-Wsrpc-User). */
const heldFor = (user: string): number => heldOf(upstream, user);
const expectBusy = expectUpstreamBusy;

describe("a session's share of an upstream", () => {
  it('past its share a session is refused -32013 naming maxConcurrentPerSession, while another session is still answered', async () => {
    const alice = await session('alice');
    const bob = await session('bob');
    const held = [alice.request('wide.get'), alice.request('wide.get')];
    await waitFor(() => heldFor('alice') === 2, 'alice to hold her share');
    expectBusy(await alice.request('wide.get'), 'wide', 'maxConcurrentPerSession', 2);

    const bobs = bob.request('wide.get');
    await waitFor(() => heldFor('bob') === 1, "bob's call to reach the upstream");
    upstream.release();
    expect((await bobs).result).toEqual({ ok: true });
    for (const reply of await Promise.all(held)) expect(reply.result).toEqual({ ok: true });
    // Answered calls give their share back.
    const again = alice.request('wide.get');
    await waitFor(() => heldFor('alice') === 1, "alice's next call to reach the upstream");
    upstream.release();
    expect((await again).result).toEqual({ ok: true });
  });

  it('the shared bound still holds across sessions, and its refusal names maxConcurrent', async () => {
    const alice = await session('alice');
    const bob = await session('bob');
    const carol = await session('carol');
    const held = [
      alice.request('shared.get'),
      alice.request('shared.get'),
      bob.request('shared.get'),
      bob.request('shared.get'),
    ];
    await waitFor(() => upstream.held.length === 4, 'the four slots to be taken');
    expectBusy(await carol.request('shared.get'), 'shared', 'maxConcurrent', 4);
    expectBusy(await alice.request('shared.get'), 'shared', 'maxConcurrentPerSession', 2);
    upstream.release();
    for (const reply of await Promise.all(held)) expect(reply.result).toEqual({ ok: true });
  });

  it('a call being retried keeps its share between attempts', async () => {
    const alice = await session('alice');
    const retried = alice.request('idem.get');
    const attempts = () => upstream.received.filter((r) => r.method === 'idem.get').length;
    await waitFor(() => heldFor('alice') === 1, 'the first attempt to reach the upstream');
    // Its connection reset: -32011, sent again (idempotent route), the retry then held.
    upstream.drop((request) => request.method === 'idem.get');
    await waitFor(() => attempts() === 2 && heldFor('alice') === 1, 'the call to be sent again');
    expectBusy(await alice.request('plain.get'), 'retrying', 'maxConcurrentPerSession', 1);
    upstream.release();
    expect((await retried).result).toEqual({ ok: true });
  });

  it('a session that closes gives its share back; a new one gets its own', async () => {
    const alice = await session('alice');
    void alice.request('wide.get');
    void alice.request('wide.get');
    await waitFor(() => heldFor('alice') === 2, 'alice to hold her share');
    alice.close();
    await waitFor(() => running.routes.upstreams.get('wide')!.inFlight === 0, 'her calls to end');
    const again = await session('alice');
    const reply = again.request('wide.get');
    await waitFor(() => heldFor('alice') === 1, "the new session's call to reach the upstream");
    upstream.release();
    expect((await reply).result).toEqual({ ok: true });
  });
});

// Each session's share of an upstream (maxConcurrentPerSession): one connection with many calls
// in flight cannot take the slots every client shares (maxConcurrent). The upstream holds each
// request until the test releases it, so what it holds is the gateway's calls in flight.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../support/waiting.js';
import { expectRetryKeepsShare, expectUpstreamBusy, heldSharesPerFile } from './held-upstream.js';
import type { LoopbackClient } from './held-upstream.js';

const shares = heldSharesPerFile(
  (url) => ({
    // maxConcurrentPerSession by default: max(1, floor(16 / 8)) = 2.
    wide: { url, maxConcurrent: 16 },
    shared: { url, maxConcurrent: 4, maxConcurrentPerSession: 2, maxConcurrentPerAddress: 4 },
    retrying: { url, maxConcurrent: 16, maxConcurrentPerSession: 1, retries: 3 },
  }),
  {
    'wide.*': 'wide',
    'shared.*': 'shared',
    'idem.*': { upstream: 'retrying', idempotent: true },
    'plain.*': 'retrying',
  },
);
const { heldFor } = shares;
const expectBusy = expectUpstreamBusy;

/** A session of `user`, every one from 127.0.0.1. */
const session = (user: string): Promise<LoopbackClient> => shares.sessionFrom('127.0.0.1', user);

describe("a session's share of an upstream", () => {
  it('past its share a session is refused -32013 naming maxConcurrentPerSession, while another session is still answered', async () => {
    const alice = await session('alice');
    const bob = await session('bob');
    const held = [alice.request('wide.get'), alice.request('wide.get')];
    await waitFor(() => heldFor('alice') === 2, 'alice to hold her share');
    expectBusy(await alice.request('wide.get'), 'wide', 'maxConcurrentPerSession', 2);

    const bobs = bob.request('wide.get');
    await waitFor(() => heldFor('bob') === 1, "bob's call to reach the upstream");
    shares.upstream.release();
    expect((await bobs).result).toEqual({ ok: true });
    for (const reply of await Promise.all(held)) expect(reply.result).toEqual({ ok: true });
    // Answered calls give their share back.
    const again = alice.request('wide.get');
    await waitFor(() => heldFor('alice') === 1, "alice's next call to reach the upstream");
    shares.upstream.release();
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
    await waitFor(() => shares.upstream.held.length === 4, 'the four slots to be taken');
    expectBusy(await carol.request('shared.get'), 'shared', 'maxConcurrent', 4);
    expectBusy(await alice.request('shared.get'), 'shared', 'maxConcurrentPerSession', 2);
    shares.upstream.release();
    for (const reply of await Promise.all(held)) expect(reply.result).toEqual({ ok: true });
  });

  it('a call being retried keeps its share between attempts', async () => {
    const alice = await session('alice');
    await expectRetryKeepsShare(shares, alice, alice, 'alice', 'maxConcurrentPerSession');
  });

  it('a session that closes gives its share back; a new one gets its own', async () => {
    const alice = await session('alice');
    void alice.request('wide.get');
    void alice.request('wide.get');
    await waitFor(() => heldFor('alice') === 2, 'alice to hold her share');
    alice.socket.close();
    await waitFor(() => shares.endpoint('wide').inFlight === 0, 'her calls to end');
    const again = await session('alice');
    const reply = again.request('wide.get');
    await waitFor(() => heldFor('alice') === 1, "the new session's call to reach the upstream");
    shares.upstream.release();
    expect((await reply).result).toEqual({ ok: true });
  });
});

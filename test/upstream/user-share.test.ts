// Each user's share of an upstream (maxConcurrentPerUser): one authenticated user opening
// connections from several addresses, each within its session's and its address's share, cannot
// take the slots every user shares. Connections come from loopback addresses of their own (every
// 127/8 address is loopback on Linux); the upstream holds each request until the test releases
// it, so what it holds is the gateway's calls in flight.
import { describe, expect, it } from 'vitest';
import { postRpc } from '../server/http-post.js';
import type { RawReply } from '../server/raw-rpc.js';
import { httpGet } from '../support/network.js';
import { waitFor } from '../support/waiting.js';
import { expectRetryKeepsShare, expectUpstreamBusy, heldSharesPerFile } from './held-upstream.js';
import type { LoopbackClient } from './held-upstream.js';

const shares = heldSharesPerFile(
  (url) => ({
    // By default: maxConcurrentPerSession max(1, floor(16 / 8)) = 2, maxConcurrentPerAddress
    // and maxConcurrentPerUser max(2, floor(16 / 4)) = 4.
    wide: { url, maxConcurrent: 16 },
    // maxConcurrentPerSession by default: min(2, maxConcurrentPerUser) = 1.
    retrying: { url, maxConcurrent: 16, maxConcurrentPerUser: 1, retries: 3 },
  }),
  {
    'wide.*': 'wide',
    'idem.*': { upstream: 'retrying', idempotent: true },
    'plain.*': 'retrying',
  },
);
const { sessionFrom, heldFor } = shares;
const wide = () => shares.endpoint('wide');

/** The `wsrpc_upstream_in_flight` gauge of `name` as the gateway's /metrics shows it. */
async function inFlightGauge(name: string): Promise<number> {
  const { body } = await httpGet(`${shares.running.httpUrl}/metrics`);
  const line = new RegExp(`^wsrpc_upstream_in_flight\\{upstream="${name}"\\} (\\d+)$`, 'm');
  return Number(line.exec(body)?.[1]);
}

/** Alice's sessions from two addresses, two calls each: her whole share of `wide` (4). */
async function aliceHoldingHerShare(): Promise<{
  calls: Promise<RawReply>[];
  sessions: LoopbackClient[];
}> {
  const sessions = [
    await sessionFrom('127.0.0.2', 'alice'),
    await sessionFrom('127.0.0.3', 'alice'),
  ];
  const calls = sessions.flatMap((session) => [
    session.request('wide.get'),
    session.request('wide.get'),
  ]);
  await waitFor(() => heldFor('alice') === 4, 'alice to hold her share');
  expect(wide().inFlightFor('alice')).toBe(4);
  return { calls, sessions };
}

describe("a user's share of an upstream", () => {
  it('sessions of one user from several addresses together past it are refused -32013 naming maxConcurrentPerUser, while another user still gets through', async () => {
    const { calls } = await aliceHoldingHerShare();
    // A third address of hers holds nothing, and her new session nothing: only her user is full.
    const third = await sessionFrom('127.0.0.4', 'alice');
    expectUpstreamBusy(await third.request('wide.get'), 'wide', 'maxConcurrentPerUser', 4);
    expect(wide().inFlightFrom('127.0.0.4')).toBe(0);
    expect(wide().inFlightFrom('127.0.0.2')).toBe(2);

    // Bob, from one of alice's addresses and from another, is answered.
    const bobHere = await sessionFrom('127.0.0.2', 'bob');
    const bobThere = await sessionFrom('127.0.0.5', 'bob');
    const bobs = [bobHere.request('wide.get'), bobThere.request('wide.get')];
    await waitFor(() => heldFor('bob') === 2, "bob's calls to reach the upstream");
    expect(wide().usersInFlight).toBe(2);
    shares.upstream.release();
    for (const reply of await Promise.all([...calls, ...bobs])) {
      expect(reply.result).toEqual({ ok: true });
    }
    // Answered calls give the user its share back, and its entry goes.
    expect(wide().inFlightFor('alice')).toBe(0);
    expect(wide().usersInFlight).toBe(0);
    const again = third.request('wide.get');
    await waitFor(() => heldFor('alice') === 1, "alice's next call to reach the upstream");
    shares.upstream.release();
    expect((await again).result).toEqual({ ok: true });
  });

  it('HTTP POST exchanges of one user from several addresses past it are refused -32013 naming maxConcurrentPerUser, while another user still gets through', async () => {
    // Each exchange is a session of its own (share 2) from an address of its own (share 4).
    const postFrom = (from: string, user: string) =>
      postRpc(
        `${shares.running.httpUrl}/rpc?user=${user}`,
        { id: 1, method: 'wide.get' },
        { from },
      );
    const alice = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'].map((from) =>
      postFrom(from, 'alice'),
    );
    await waitFor(() => heldFor('alice') === 4, "alice's exchanges to reach the upstream");
    expect(wide().inFlightFor('alice')).toBe(4);
    const fifth = await postFrom('127.0.0.6', 'alice');
    expect(fifth.status).toBe(200);
    expectUpstreamBusy(fifth.reply!, 'wide', 'maxConcurrentPerUser', 4);
    expect(wide().inFlightFrom('127.0.0.6')).toBe(0);
    // Bob, over POST from one of alice's addresses and over a connection, is answered.
    const bobPost = postFrom('127.0.0.2', 'bob');
    const bob = await sessionFrom('127.0.0.7', 'bob');
    const bobCall = bob.request('wide.get');
    await waitFor(() => heldFor('bob') === 2, "bob's calls to reach the upstream");
    shares.upstream.release();
    for (const answer of await Promise.all([...alice, bobPost])) {
      expect(answer.reply?.result).toEqual({ ok: true });
    }
    expect((await bobCall).result).toEqual({ ok: true });
    expect(wide().inFlightFor('alice')).toBe(0);
    expect(wide().usersInFlight).toBe(0);
  });

  it('anonymous sessions are not counted per user: past a user share across addresses, they still get through', async () => {
    const sessions = [
      await sessionFrom('127.0.0.2'),
      await sessionFrom('127.0.0.3'),
      await sessionFrom('127.0.0.4'),
    ];
    // Six calls, each session within its share (2) and each address within its (4): more than a
    // user's share (4), and all of them held.
    const calls = sessions.flatMap((session) => [
      session.request('wide.get'),
      session.request('wide.get'),
    ]);
    await waitFor(() => heldFor(undefined) === 6, 'the anonymous calls to reach the upstream');
    expect(wide().usersInFlight).toBe(0);
    shares.upstream.release();
    for (const reply of await Promise.all(calls)) expect(reply.result).toEqual({ ok: true });
  });

  it('calls given up (rpc.cancel) give the user its share back', async () => {
    const { sessions } = await aliceHoldingHerShare();
    const [first] = sessions as [LoopbackClient, LoopbackClient];
    // Calls 1 and 2 of the session from 127.0.0.2.
    for (const id of [1, 2]) first.cancel(id);
    await waitFor(() => wide().inFlightFor('alice') === 2, 'the cancelled calls to let go');
    const third = await sessionFrom('127.0.0.4', 'alice');
    const next = [third.request('wide.get'), third.request('wide.get')];
    await waitFor(() => heldFor('alice') === 4, "her new session's calls to reach the upstream");
    expectUpstreamBusy(await first.request('wide.get'), 'wide', 'maxConcurrentPerUser', 4);
    shares.upstream.release();
    for (const reply of await Promise.all(next)) expect(reply.result).toEqual({ ok: true });
    await waitFor(() => wide().inFlight === 0, 'every call to end');
    expect(wide().usersInFlight).toBe(0);
    expect(await inFlightGauge('wide')).toBe(0);
  });

  it('connections that close give the user its share back', async () => {
    const { sessions } = await aliceHoldingHerShare();
    for (const session of sessions) session.socket.close();
    await waitFor(() => wide().inFlightFor('alice') === 0, 'her calls to end');
    expect(wide().usersInFlight).toBe(0);
    expect(await inFlightGauge('wide')).toBe(0);
    const again = await sessionFrom('127.0.0.4', 'alice');
    const reply = again.request('wide.get');
    await waitFor(() => heldFor('alice') === 1, "her new session's call to reach the upstream");
    shares.upstream.release();
    expect((await reply).result).toEqual({ ok: true });
  });

  it("a call being retried keeps its user's share between attempts", async () => {
    const here = await sessionFrom('127.0.0.2', 'alice');
    const there = await sessionFrom('127.0.0.3', 'alice');
    await expectRetryKeepsShare(shares, here, there, 'alice', 'maxConcurrentPerUser');
  });
});

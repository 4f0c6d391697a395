// The slots of an upstream kept for new callers (reservedForNewCallers): callers that each hold no
// more than their shares, but together hold nearly every slot, cannot refuse a caller with no call
// in flight. Connections come from loopback addresses of their own; the upstream holds each
// request until the test releases it, so what it holds is the gateway's calls in flight.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../support/waiting.js';
import { expectUpstreamBusy, heldSharesPerFile } from './held-upstream.js';

const shares = heldSharesPerFile(
  (url) => ({
    // Each address may hold 4 (one session all of them); 2 of the 16 slots are kept for new
    // callers by default (floor(16 / 8)).
    slow: { url, maxConcurrent: 16, maxConcurrentPerSession: 4, maxConcurrentPerAddress: 4 },
    unreserved: {
      url,
      maxConcurrent: 16,
      maxConcurrentPerSession: 4,
      maxConcurrentPerAddress: 4,
      reservedForNewCallers: 0,
    },
  }),
  { 'slow.*': 'slow', 'open.*': 'unreserved' },
);
const { sessionFrom, heldFor } = shares;

/** A session from 127.0.0.`n` of user `u<n>` for each `n`, each holding `calls` of `method`. */
async function heavyCallers(
  method: string,
  addresses: readonly number[],
  calls: number,
): Promise<Promise<unknown>[]> {
  const held: Promise<unknown>[] = [];
  for (const n of addresses) {
    const client = await sessionFrom(`127.0.0.${n}`, `u${n}`);
    for (let i = 0; i < calls; i++) held.push(client.request(method));
    await waitFor(() => heldFor(`u${n}`) === calls, `127.0.0.${n} to hold ${calls}`);
  }
  return held;
}

describe('the slots kept for new callers', () => {
  it('callers already calling are refused the last slots (-32013 naming reservedForNewCallers), which go to callers with none in flight', async () => {
    // Three addresses at their full share: 12 of 16.
    const held = await heavyCallers('slow.get', [2, 3, 4], 4);
    // A fourth gets two more: 14, the most callers already calling may hold together.
    const fourth = await sessionFrom('127.0.0.5', 'u5');
    held.push(fourth.request('slow.get'), fourth.request('slow.get'));
    await waitFor(() => heldFor('u5') === 2, 'the fourth address to hold 2');
    // Within its session's and its address's shares, but the rest are kept.
    expectUpstreamBusy(await fourth.request('slow.get'), 'slow', 'reservedForNewCallers', 14);
    // A caller with none in flight (a new address, a new user) gets one of the kept slots.
    const newcomer = await sessionFrom('127.0.0.6', 'u6');
    held.push(newcomer.request('slow.get'));
    await waitFor(() => heldFor('u6') === 1, "the new caller's call to reach the upstream");
    // Calling now, it is refused the last slot.
    expectUpstreamBusy(await newcomer.request('slow.get'), 'slow', 'reservedForNewCallers', 14);
    // So is a new session of an address already calling, and a new session of a user already
    // calling from a new address.
    const sameAddress = await sessionFrom('127.0.0.2', 'u7');
    expectUpstreamBusy(await sameAddress.request('slow.get'), 'slow', 'reservedForNewCallers', 14);
    const sameUser = await sessionFrom('127.0.0.8', 'u5');
    expectUpstreamBusy(await sameUser.request('slow.get'), 'slow', 'reservedForNewCallers', 14);
    const another = await sessionFrom('127.0.0.9', 'u9');
    held.push(another.request('slow.get'));
    await waitFor(() => heldFor('u9') === 1, "the second new caller's call to reach the upstream");
    expect(shares.endpoint('slow').inFlight).toBe(16);
    // Full: a new caller too is refused, naming the upstream's bound.
    const late = await sessionFrom('127.0.0.10', 'u10');
    expectUpstreamBusy(await late.request('slow.get'), 'slow', 'maxConcurrent', 16);

    shares.upstream.release();
    for (const reply of (await Promise.all(held)) as { result?: unknown }[]) {
      expect(reply.result).toEqual({ ok: true });
    }
  });

  it('with reservedForNewCallers 0, four addresses at their full shares hold every slot', async () => {
    const held = await heavyCallers('open.get', [2, 3, 4, 5], 4);
    expect(shares.endpoint('unreserved').inFlight).toBe(16);
    const newcomer = await sessionFrom('127.0.0.6', 'u6');
    expectUpstreamBusy(await newcomer.request('open.get'), 'unreserved', 'maxConcurrent', 16);
    shares.upstream.release();
    await Promise.all(held);
  });
});

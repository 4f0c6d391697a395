// Each client address's share of an upstream (maxConcurrentPerAddress): one address opening
// several connections, each within its session's share, cannot take the slots every client
// shares. Connections come from loopback addresses of their own (every 127/8 address is loopback
// on Linux); the upstream holds each request until the test releases it, so what it holds is the
// gateway's calls in flight.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../support/waiting.js';
import { expectRetryKeepsShare, expectUpstreamBusy, heldSharesPerFile } from './held-upstream.js';

const shares = heldSharesPerFile(
  (url) => ({
    // By default: maxConcurrentPerSession max(1, floor(16 / 8)) = 2, and
    // maxConcurrentPerAddress max(2, floor(16 / 4)) = 4.
    wide: { url, maxConcurrent: 16 },
    retrying: { url, maxConcurrent: 16, maxConcurrentPerAddress: 1, retries: 3 },
  }),
  {
    'wide.*': 'wide',
    'idem.*': { upstream: 'retrying', idempotent: true },
    'plain.*': 'retrying',
  },
);
const { sessionFrom, heldFor } = shares;
const expectBusy = expectUpstreamBusy;

describe("an address's share of an upstream", () => {
  it('connections from one address together past it are refused -32013 naming maxConcurrentPerAddress, while another address is still answered', async () => {
    const a1 = await sessionFrom('127.0.0.2', 'a1');
    const a2 = await sessionFrom('127.0.0.2', 'a2');
    const a3 = await sessionFrom('127.0.0.2', 'a3');
    const b = await sessionFrom('127.0.0.3', 'b');
    // Two sessions of the address each take their whole share: the address's four slots.
    const held = [a1, a1, a2, a2].map((client) => client.request('wide.get'));
    await waitFor(() => heldFor('a1') === 2 && heldFor('a2') === 2, 'the address to hold four');
    // A third session of the address is within its own share, not within the address's.
    expectBusy(await a3.request('wide.get'), 'wide', 'maxConcurrentPerAddress', 4);
    expect(shares.endpoint('wide').inFlightFrom('127.0.0.2')).toBe(4);

    const bs = [b.request('wide.get'), b.request('wide.get')];
    await waitFor(() => heldFor('b') === 2, "the other address's calls to reach the upstream");
    shares.upstream.release();
    for (const reply of await Promise.all([...held, ...bs])) {
      expect(reply.result).toEqual({ ok: true });
    }
    // Answered calls give the address its share back, and its entry goes.
    const wide = shares.endpoint('wide');
    expect(wide.inFlightFrom('127.0.0.2')).toBe(0);
    expect(wide.addressesInFlight).toBe(0);
    const again = a3.request('wide.get');
    await waitFor(() => heldFor('a3') === 1, "the third session's call to reach the upstream");
    expect(wide.addressesInFlight).toBe(1);
    shares.upstream.release();
    expect((await again).result).toEqual({ ok: true });
    expect(wide.addressesInFlight).toBe(0);
  });

  it("a call being retried keeps its address's share between attempts", async () => {
    const a1 = await sessionFrom('127.0.0.4', 'r1');
    const a2 = await sessionFrom('127.0.0.4', 'r2');
    await expectRetryKeepsShare(shares, a1, a2, 'r1', 'maxConcurrentPerAddress');
  });

  it('connections that close give the address its share back', async () => {
    const a1 = await sessionFrom('127.0.0.5', 'c1');
    const a2 = await sessionFrom('127.0.0.5', 'c2');
    for (const client of [a1, a1, a2, a2]) void client.request('wide.get');
    await waitFor(() => heldFor('c1') === 2 && heldFor('c2') === 2, 'the address to hold four');
    a1.socket.close();
    a2.socket.close();
    const wide = shares.endpoint('wide');
    await waitFor(() => wide.inFlightFrom('127.0.0.5') === 0, 'their calls to end');
    expect(wide.addressesInFlight).toBe(0);
    const a3 = await sessionFrom('127.0.0.5', 'c3');
    const reply = a3.request('wide.get');
    await waitFor(() => heldFor('c3') === 1, "the new session's call to reach the upstream");
    shares.upstream.release();
    expect((await reply).result).toEqual({ ok: true });
  });
});

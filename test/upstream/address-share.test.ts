// Each client address's share of an upstream (maxConcurrentPerAddress): one address opening
// several connections, each within its session's share, cannot take the slots every client
// shares. Connections come from loopback addresses of their own (every 127/8 address is loopback
// on Linux); the upstream holds each request until the test releases it, so what it holds is the
// gateway's calls in flight.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { waitFor } from '../support/waiting.js';
import {
  clientFrom,
  expectUpstreamBusy,
  heldFor as heldOf,
  startHeldUpstream,
} from './held-upstream.js';
import type { HeldUpstream, LoopbackClient } from './held-upstream.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

const res = new Resources();
let upstream: HeldUpstream;
let running: RoutedGateway;

beforeAll(async () => {
  upstream = await startHeldUpstream();
  const url = upstream.url;
  running = await startRoutedGateway({
    upstreams: {
      // By default: maxConcurrentPerSession max(1, floor(16 / 8)) = 2, and
      // maxConcurrentPerAddress max(2, floor(16 / 4)) = 4.
      wide: { url, maxConcurrent: 16 },
      retrying: { url, maxConcurrent: 16, maxConcurrentPerAddress: 1, retries: 3 },
    },
    methods: {
      'wide.*': 'wide',
      'idem.*': { upstream: 'retrying', idempotent: true },
      'plain.*': 'retrying',
    },
  });
});

afterEach(async () => {
  upstream.release();
  await res.cleanup();
  await waitFor(() => running.gateway.sessions.size === 0, 'the sessions to close');
  for (const endpoint of running.routes.upstreams.values()) {
    await waitFor(() => endpoint.inFlight === 0, `${endpoint.name} to hold no call`);
    expect(endpoint.addressesInFlight).toBe(0);
  }
});

afterAll(async () => {
  await running?.close();
  await upstream?.stop();
});

/** A session of `user` over a connection from the loopback address `from`. */
const sessionFrom = (from: string, user: string): Promise<LoopbackClient> =>
  clientFrom(res, running.url, from, user);

/** Held requests sent for `user` (X-Wsrpc-User). */
const heldFor = (user: string): number => heldOf(upstream, user);
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
    expect(running.routes.upstreams.get('wide')!.inFlightFrom('127.0.0.2')).toBe(4);

    const bs = [b.request('wide.get'), b.request('wide.get')];
    await waitFor(() => heldFor('b') === 2, "the other address's calls to reach the upstream");
    upstream.release();
    for (const reply of await Promise.all([...held, ...bs])) {
      expect(reply.result).toEqual({ ok: true });
    }
    // Answered calls give the address its share back, and its entry goes.
    const wide = running.routes.upstreams.get('wide')!;
    expect(wide.inFlightFrom('127.0.0.2')).toBe(0);
    expect(wide.addressesInFlight).toBe(0);
    const again = a3.request('wide.get');
    await waitFor(() => heldFor('a3') === 1, "the third session's call to reach the upstream");
    expect(wide.addressesInFlight).toBe(1);
    upstream.release();
    expect((await again).result).toEqual({ ok: true });
    expect(wide.addressesInFlight).toBe(0);
  });

  it("a call being retried keeps its address's share between attempts", async () => {
    const a1 = await sessionFrom('127.0.0.4', 'r1');
    const a2 = await sessionFrom('127.0.0.4', 'r2');
    const retried = a1.request('idem.get');
    const attempts = () => upstream.received.filter((r) => r.method === 'idem.get').length;
    await waitFor(() => heldFor('r1') === 1, 'the first attempt to reach the upstream');
    // Its connection reset: -32011, sent again (idempotent route), the retry then held.
    upstream.drop((request) => request.method === 'idem.get');
    await waitFor(() => attempts() === 2 && heldFor('r1') === 1, 'the call to be sent again');
    expectBusy(await a2.request('plain.get'), 'retrying', 'maxConcurrentPerAddress', 1);
    upstream.release();
    expect((await retried).result).toEqual({ ok: true });
  });

  it('connections that close give the address its share back', async () => {
    const a1 = await sessionFrom('127.0.0.5', 'c1');
    const a2 = await sessionFrom('127.0.0.5', 'c2');
    for (const client of [a1, a1, a2, a2]) void client.request('wide.get');
    await waitFor(() => heldFor('c1') === 2 && heldFor('c2') === 2, 'the address to hold four');
    a1.socket.close();
    a2.socket.close();
    const wide = running.routes.upstreams.get('wide')!;
    await waitFor(() => wide.inFlightFrom('127.0.0.5') === 0, 'their calls to end');
    expect(wide.addressesInFlight).toBe(0);
    const a3 = await sessionFrom('127.0.0.5', 'c3');
    const reply = a3.request('wide.get');
    await waitFor(() => heldFor('c3') === 1, "the new session's call to reach the upstream");
    upstream.release();
    expect((await reply).result).toEqual({ ok: true });
  });
});

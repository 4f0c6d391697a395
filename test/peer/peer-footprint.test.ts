import { expect, it } from 'vitest';
import { IncomingCalls } from '../../src/peer/incoming-calls.js';
import { silentLogger } from '../../src/peer/logger.js';
import { MethodRegistry } from '../../src/peer/method-registry.js';
import { PeerCore } from '../../src/peer/peer-core.js';
import { peerConfig } from '../../src/peer/peer-options.js';
import type { Transport } from '../../src/transport/transport.js';
import { fullGc, heapUsedButCode, selfSizesOf } from '../support/heap.js';

/*
 * What an idle peer holds: a gateway keeps one per connection, so every field is paid for by
 * every idle connection. Two readings. The peer object's own size, from a heap snapshot, is
 * exact: 112 bytes (a 24-byte header and eleven fields); private methods (`#name()`) add a brand
 * field to every instance, and `closed`'s promise and resolver kept as two fields add one more:
 * 128. And the heap (but for compiled code) grown by making many peers over transports made
 * beforehand, after full collections, which also counts what a peer allocates besides itself:
 * the least of five rounds of 50,000 (Node 20, x64, vitest) read 101 to 107 alone and up to 114
 * under a full suite's load; a 16-byte object more per peer reads 117 and up alone.
 */
const BOUND_SELF_BYTES = 112;
const BOUND_BYTES_PER_PEER = 120;
const PEERS = 50_000;
// Five: under a full suite's load a round can read a few bytes more than alone.
const ROUNDS = 5;
const WARM_UP = 1000;

function idleTransport(): Transport {
  return {
    bufferedAmount: 0,
    listen: () => undefined,
    send: () => undefined,
    close: () => undefined,
  };
}

/** Heap grown per peer by making PEERS idle peers (after a warm-up, so the shapes settle). */
function perPeerBytes(): number {
  const config = peerConfig<unknown>({});
  const transports = Array.from({ length: PEERS + WARM_UP }, idleTransport);
  const peers = new Array<PeerCore<unknown> | undefined>(PEERS + WARM_UP).fill(undefined);
  const session = {};
  for (let i = 0; i < WARM_UP; i++) peers[i] = new PeerCore(transports[i]!, { session }, config);
  fullGc();
  const before = heapUsedButCode();
  for (let i = WARM_UP; i < PEERS + WARM_UP; i++) {
    peers[i] = new PeerCore(transports[i]!, { session }, config);
  }
  fullGc();
  const grown = heapUsedButCode() - before;
  expect(peers.every((peer) => peer !== undefined && !peer.isClosed)).toBe(true);
  return grown / PEERS;
}

it('an idle peer is an object of at most 112 bytes, and holds little besides', async () => {
  const config = peerConfig<unknown>({});
  const kept = Array.from(
    { length: 10 },
    () => new PeerCore(idleTransport(), { session: {} }, config),
  );
  const sizes = await selfSizesOf('PeerCore');
  expect(sizes.length).toBeGreaterThanOrEqual(kept.length);
  expect(Math.max(...sizes)).toBeLessThanOrEqual(BOUND_SELF_BYTES);
  // The least of a few rounds: what else the test process allocates meanwhile only adds.
  const perPeer = Math.min(...Array.from({ length: ROUNDS }, perPeerBytes));
  expect(perPeer).toBeLessThanOrEqual(BOUND_BYTES_PER_PEER);
  expect(kept.every((peer) => !peer.isClosed)).toBe(true);
}, 60_000);

/*
 * What the answering side of a connection keeps once the calls it ran have ended: a gateway's
 * connections answer calls all day, so whatever a call leaves behind is paid by every one of
 * them. Measured as above, over IncomingCalls that have each run and ended one call of an async
 * handler: 108 to 112 bytes in this reading (Node 20, x64, vitest), the object itself, as the
 * running calls are a list through the calls and an ended call leaves nothing. A Set and a Map
 * of running calls, made at the first call and kept, read 432 to 444. The bound sits between.
 */
const BOUND_BYTES_PER_ANSWERING_SIDE = 160;
const SIDES = 20_000;

async function perAnsweringSideBytes(): Promise<number> {
  const registry = new MethodRegistry<unknown>();
  // A promise, so the call is tracked among the running ones until it settles.
  registry.method('work', (params) => Promise.resolve((params as number[])[0]));
  const config = peerConfig<unknown>({ registry });
  const session = {};
  const answer = async (side: IncomingCalls<unknown>, id: number): Promise<void> => {
    const reply = await side.request(id, 'work', [id], '2.0');
    expect(reply).toBe(`{"jsonrpc":"2.0","result":${id},"id":${id}}`);
  };
  const sides: IncomingCalls<unknown>[] = [];
  for (let i = 0; i < WARM_UP; i++)
    sides.push(new IncomingCalls(session, silentLogger, config, undefined));
  await Promise.all(sides.map((side, i) => answer(side, i)));
  fullGc();
  const before = heapUsedButCode();
  const measured: IncomingCalls<unknown>[] = [];
  for (let i = 0; i < SIDES; i++)
    measured.push(new IncomingCalls(session, silentLogger, config, undefined));
  await Promise.all(measured.map((side, i) => answer(side, i)));
  fullGc();
  const grown = heapUsedButCode() - before;
  expect(measured.every((side) => side.inFlightCount === 0)).toBe(true);
  return grown / SIDES;
}

it('a connection whose calls have ended keeps nothing of them', async () => {
  const rounds: number[] = [];
  for (let i = 0; i < ROUNDS; i++) rounds.push(await perAnsweringSideBytes());
  expect(Math.min(...rounds)).toBeLessThanOrEqual(BOUND_BYTES_PER_ANSWERING_SIDE);
});

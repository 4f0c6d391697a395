import { expect, it } from 'vitest';
import { PeerCore } from '../../src/peer/peer-core.js';
import { peerConfig } from '../../src/peer/peer-options.js';
import type { Transport } from '../../src/transport/transport.js';
import { fullGc, heapUsedButCode } from '../support/heap.js';

/*
 * What an idle peer holds: a gateway keeps one per connection, so every field is paid for by
 * every idle connection. Measured as the heap (but for compiled code) grown by making many
 * peers over transports made beforehand, after full collections.
 *
 * Heap snapshots give 112 bytes a peer (a 24-byte header and eleven fields); this reading, the
 * least of three rounds of 50,000 (Node 20, x64, vitest), measured 101 to 107. Private methods
 * (`#name()`) add a brand field to every instance, and `closed`'s promise and resolver kept as
 * two fields add one more: 128 bytes in a snapshot, 116 to 120 here. The bound sits between.
 */
const BOUND_BYTES_PER_PEER = 112;
const PEERS = 50_000;
const ROUNDS = 3;
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

it('an idle peer holds at most 112 bytes of its own', () => {
  // The least of a few rounds: what else the test process allocates meanwhile only adds.
  const perPeer = Math.min(...Array.from({ length: ROUNDS }, perPeerBytes));
  expect(perPeer).toBeLessThanOrEqual(BOUND_BYTES_PER_PEER);
});

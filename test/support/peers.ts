import type { PendingCalls } from '../../src/peer/pending-calls.js';
import type { CallOptions } from '../../src/peer/pending-calls.js';
import { Peer } from '../../src/peer/peer.js';
import type { PeerOptions } from '../../src/peer/peer.js';
import { MethodRegistry } from '../../src/peer/method-registry.js';
import { createInMemoryPair } from '../../src/transport/in-memory-transport.js';
import type { InMemoryTransport } from '../../src/transport/in-memory-transport.js';

export interface PeerPair {
  a: Peer<string>;
  b: Peer<string>;
  ta: InMemoryTransport;
  tb: InMemoryTransport;
}

/** Two peers over the in-memory linked pair; `a` has session "a", `b` has "b". */
export function createPeerPair(
  optionsA: Partial<PeerOptions<string>> = {},
  optionsB: Partial<PeerOptions<string>> = {},
): PeerPair {
  const [ta, tb] = createInMemoryPair();
  const a = new Peer<string>(ta, { registry: new MethodRegistry(), ...optionsA, session: 'a' });
  const b = new Peer<string>(tb, { registry: new MethodRegistry(), ...optionsB, session: 'b' });
  return { a, b, ta, tb };
}

/**
 * A peer whose other end is driven by hand: `send(text)` delivers raw text to
 * the peer and resolves with every frame the peer wrote back within a few ticks.
 */
export function createRawPeer(options: Partial<PeerOptions<string>> = {}) {
  const [ta, tb] = createInMemoryPair();
  const peer = new Peer<string>(ta, { registry: new MethodRegistry(), ...options, session: 'raw' });
  const received: string[] = [];
  tb.listen({ receive: (text) => received.push(text), transportClosed: () => undefined });
  return {
    peer,
    received,
    async send(text: string, ticks = 5): Promise<string[]> {
      const start = received.length;
      tb.send(text);
      await settle(ticks);
      return received.slice(start);
    },
  };
}

/** Let queued microtasks and a few macrotasks run. */
export async function settle(ticks = 5): Promise<void> {
  for (let i = 0; i < ticks; i++) await new Promise((r) => setImmediate(r));
}

/** A call opened in `table`: its id (the table's `lastId`) and its promise. */
export function openCall(
  table: PendingCalls,
  method: string,
  options?: CallOptions,
): { id: number; promise: Promise<unknown> } {
  const promise = table.add(method, options);
  return { id: table.lastId, promise };
}

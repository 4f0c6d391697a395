/**
 * The server API's `members` reads are bounded on the node, as its `history` reads are by
 * `limits.maxHistoryReads`: one batch POST of 100 `members` calls (and a backend can send as
 * many batches as it has sockets) has at most MAX_MEMBERS_READS presence reads under way at
 * once; the others wait their turn, holding no page, and every call is answered.
 */
import { afterEach, expect, it } from 'vitest';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { MemoryPresenceStore } from '../../src/pubsub/presence.js';
import type { PresencePage } from '../../src/pubsub/presence.js';
import { MAX_MEMBERS_READS } from '../../src/server-api/methods.js';
import { waitFor } from '../support/waiting.js';
import { API_KEY, ApiResources, HeldGate } from './support.js';

const res = new ApiResources();
afterEach(() => res.cleanup());

/** A presence store whose member reads wait until the test lets them all go. */
class HeldStore extends MemoryPresenceStore {
  readonly gate = new HeldGate();

  override members(
    topic: string,
    cursor: string | undefined,
    limit: number,
  ): Promise<PresencePage> {
    return this.gate.through(() => super.members(topic, cursor, limit));
  }
}

class HeldBroker extends MemoryBroker {
  override readonly presence = new HeldStore();
}

it('server API members reads stay within MAX_MEMBERS_READS on the node', async () => {
  const broker = new HeldBroker();
  const { gateway } = await res.gateway({ broker });
  gateway.topic('lobby', { presence: true });
  const api = await res.api(gateway);
  const batch = Array.from({ length: 100 }, (_, i) => ({
    jsonrpc: '2.0',
    id: i,
    method: 'members',
    params: { topic: 'lobby' },
  }));
  const response = fetch(api.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify(batch),
  });
  await waitFor(() => broker.presence.gate.running >= MAX_MEMBERS_READS, 'reads to start');
  broker.presence.gate.letGo();
  const replies = (await (await response).json()) as { result?: unknown; error?: unknown }[];
  expect(replies).toHaveLength(100);
  expect(replies.every((reply) => reply.result !== undefined)).toBe(true);
  expect(broker.presence.gate.peak).toBe(MAX_MEMBERS_READS);
});

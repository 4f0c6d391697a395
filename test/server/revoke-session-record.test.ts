/**
 * What `revokeSession` of a session on another node writes before it publishes (Broker.denySession):
 * the record first, for `keepForMs`, then the message to the node's topic; a record refused (the
 * broker's bound, or the broker down) sends no message and rejects precisely; a broker without
 * such records sends the message alone.
 */
import { describe, expect, it } from 'vitest';
import type { Broker, BrokerMessage } from '../../src/pubsub/broker.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { SessionDenyListFullError } from '../../src/pubsub/session-deny-list.js';
import { Revocations } from '../../src/server/revocation.js';
import { SessionRouter } from '../../src/server/session-router.js';
import { captureLogger } from '../support/logging.js';

/** Node `here`'s Revocations on `broker`, with no sessions of its own. */
async function node(broker: Broker) {
  const { logger } = captureLogger();
  const router = new SessionRouter(broker, 'here', {} as never, logger);
  const revocations = new Revocations<object>({
    broker,
    router,
    nodeId: 'here',
    logger,
    exposeErrorDetails: false,
    userOf: undefined,
    issuedAtOf: undefined,
    sessions: () => [],
  });
  const sent: BrokerMessage[] = [];
  await broker.subscribe('$node.there', (message) => sent.push(message));
  return { revocations, sent };
}

describe('revokeSession of a session on another node', () => {
  it('records it for keepForMs, then sends the message', async () => {
    let now = 1_000;
    const broker = new MemoryBroker({ now: () => now });
    const { revocations, sent } = await node(broker);
    expect(await revocations.revokeSession('there-s1', { reason: 'bye', keepForMs: 500 })).toBe(
      true,
    );
    expect(sent.length).toBe(1);
    const [record] = await broker.deniedSessions('there');
    expect(record).toMatchObject({ session: 'there-s1', reason: 'bye', until: 1_500 });
    now = 1_500;
    expect(await broker.deniedSessions('there')).toEqual([]);
    // By default as long as revokeUser lists a user: one hour.
    await revocations.revokeSession('there-s2');
    expect((await broker.deniedSessions('there'))[0]).toMatchObject({
      session: 'there-s2',
      reason: 'revoked',
      until: 1_500 + 3_600_000,
    });
  });

  it('refuses keepForMs outside 1 to 24 h', async () => {
    const { revocations, sent } = await node(new MemoryBroker());
    for (const keepForMs of [0, 86_400_001, 1.5, '10']) {
      await expect(
        revocations.revokeSession('there-s1', { keepForMs } as { keepForMs: number }),
      ).rejects.toThrow(/revokeSession: keepForMs must be an integer from 1 to 86400000/);
    }
    expect(sent.length).toBe(0);
  });

  it('past the bound: SessionDenyListFullError, and no message', async () => {
    const broker = new MemoryBroker({ maxDeniedSessions: 1 });
    const { revocations, sent } = await node(broker);
    await revocations.revokeSession('there-s1');
    await expect(revocations.revokeSession('there-s2')).rejects.toThrow(SessionDenyListFullError);
    expect(sent.length).toBe(1);
  });

  it('a record the broker does not take: -32009 naming the session, and no message', async () => {
    const broker = new MemoryBroker();
    broker.denySession = () => Promise.reject(new Error('down'));
    const { revocations, sent } = await node(broker);
    await expect(revocations.revokeSession('there-s1')).rejects.toMatchObject({
      code: -32009,
      data: { session: 'there-s1' },
    });
    expect(sent.length).toBe(0);
  });

  it('a broker without records: the message alone', async () => {
    const broker = new MemoryBroker();
    Object.assign(broker, { denySession: undefined, deniedSessions: undefined });
    const { revocations, sent } = await node(broker);
    expect(await revocations.revokeSession('there-s1')).toBe(true);
    expect(sent.length).toBe(1);
  });
});

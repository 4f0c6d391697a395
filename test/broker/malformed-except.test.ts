/**
 * A message whose except list is there but is not a list of session ids (never one this gateway
 * writes: another writer of the broker's keys or subjects) reaches every subscriber, as one that
 * leaves out nobody, and each broker says so through its onError: the Redis broker for a live
 * message and for one read back from history, the NATS broker for a delivered one. Made here by
 * handing the broker's own publish an except list of numbers, which it carries as written.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Broker, BrokerMessage } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { deleteNatsStreams, deleteRedisKeys, NATS_URL, REDIS_URL } from '../support/brokers.js';
import { waitFor } from '../support/waiting.js';

const prefix = `wsrpc-test-badexcept-${randomBytes(4).toString('hex')}`;
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});
afterAll(async () => {
  await deleteRedisKeys(REDIS_URL, prefix);
  await deleteNatsStreams(prefix);
});

/** Not a list of session ids: what no gateway writes, and the broker's publish carries as is. */
const NUMBERS = [1, 2] as unknown as readonly string[];
const retention = { maxLength: 100, maxAgeMs: 60_000 };

const malformed = (topic: string, seq: number): string =>
  `topic ${topic}, message ${seq}: its except list is not a list of session ids; delivered to every subscriber`;

/**
 * `publisher` publishes to `topic` with the malformed list, `receiver` subscribed: the message
 * arrives with no except, and `errors` (the receiver's onError) names it. Resolves its seq.
 */
async function deliveredAndReported(
  publisher: Broker,
  receiver: Broker,
  topic: string,
  errors: string[],
): Promise<number> {
  const delivered: BrokerMessage[] = [];
  await receiver.subscribe(topic, (message) => delivered.push(message));
  const seq = await publisher.publish(topic, '"hello"', retention, NUMBERS);
  await waitFor(() => delivered.length === 1, 'the message');
  expect(delivered[0]).toMatchObject({ seq, payload: '"hello"' });
  expect(delivered[0]!.except).toBeUndefined();
  expect(errors).toContain(malformed(topic, seq));
  return seq;
}

describe('a message with a malformed except list', () => {
  it('Redis: is delivered with no except, and reported, live and from history', async () => {
    const errors: string[] = [];
    const publisher = new RedisBroker({ url: REDIS_URL, prefix: `${prefix}:` });
    const receiver = new RedisBroker({
      url: REDIS_URL,
      prefix: `${prefix}:`,
      onError: (error) => errors.push(error.message),
    });
    closers.push(
      () => publisher.close(),
      () => receiver.close(),
    );
    await Promise.all([publisher.connect(), receiver.connect()]);
    const topic = 'redis.bad';
    const seq = await deliveredAndReported(publisher, receiver, topic, errors);

    errors.splice(0);
    const history = await receiver.history(topic, 0);
    expect(history.messages.map((m) => [m.seq, m.except])).toEqual([[seq, undefined]]);
    expect(errors).toEqual([malformed(topic, seq)]);
  });

  it('NATS: is delivered with no except, and reported', async () => {
    const errors: string[] = [];
    const publisher = await NatsBroker.connect({ servers: NATS_URL, prefix });
    const receiver = await NatsBroker.connect({
      servers: NATS_URL,
      prefix,
      onError: (error) => errors.push((error as Error).message),
    });
    closers.push(
      () => publisher.close(),
      () => receiver.close(),
    );
    await deliveredAndReported(publisher, receiver, 'nats.bad', errors);
  });
});

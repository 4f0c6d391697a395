/**
 * A history read on NATS whose fetch comes back empty while the stream still holds what it
 * asked for (a server slower than the fetch's expiry, as under load): the read must not answer
 * a short page as if those messages were gone, since a resume then tells them to its
 * subscriber as lost (a counted gap) although history holds them. The slowness is the one thing
 * not real here: the consumer's first fetch is answered empty, as one that expired would be.
 */
import { randomBytes } from 'node:crypto';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { ConsumerMessages } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readHistory } from '../../src/pubsub/nats-history.js';
import type { Link } from '../../src/pubsub/nats-link.js';
import { withConsumerHooks } from '../support/nats-consumer-hooks.js';
import { canConnect } from '../support/network.js';

const NATS_URL = 'nats://127.0.0.1:4222';
const skip = !(await canConnect(4222)) && process.env.CI !== 'true';
const stream = `wsrpcshort${randomBytes(4).toString('hex')}`;
const subject = `${stream}.t`;

let nc: NatsConnection;
let link: Link;

/** `link` whose consumers answer their first `empty` fetches with no message. */
function slowFetches(empty: number): Link {
  let left = empty;
  const emptyBatch = (): ConsumerMessages => {
    const none = (async function* () {})();
    return Object.assign(none, {
      status: () => (async function* () {})(),
      close: () => Promise.resolve(undefined),
      closed: () => Promise.resolve(undefined),
      stop: () => undefined,
    }) as unknown as ConsumerMessages;
  };
  return withConsumerHooks(link, {
    fetch: (fetch) => (left-- > 0 ? Promise.resolve(emptyBatch()) : fetch()),
  });
}

describe.skipIf(skip)('NATS history: a fetch that comes back empty', () => {
  beforeAll(async () => {
    nc = await connect({ servers: NATS_URL });
    link = { nc, js: jetstream(nc), jsm: await jetstreamManager(nc, { checkAPI: false }) };
    await link.jsm.streams.add({ name: stream, subjects: [subject] });
    for (let i = 1; i <= 5; i++) await link.js.publish(subject, String(i));
  });

  afterAll(async () => {
    await link.jsm.streams.delete(stream).catch(() => false);
    await nc.close();
  });

  it('reads on: the page holds what the stream holds', async () => {
    const history = await readHistory(slowFetches(1), stream, 't', 1, 3);
    expect(history.lastSeq).toBe(5);
    expect(history.messages.map((m) => m.seq)).toEqual([2, 3, 4]);
  });

  it('fails rather than answer a short page when the fetches keep coming back empty', async () => {
    await expect(readHistory(slowFetches(1_000), stream, 't', 0)).rejects.toThrow(
      /came back empty/,
    );
  });
});

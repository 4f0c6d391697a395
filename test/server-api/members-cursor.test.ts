/**
 * The server API's `members` with a cursor no page returned: -32602 naming the field, on the
 * NATS broker too (whose pages go by sequence number, so "abc" is no cursor there), not -32009
 * Broker unavailable.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNats } from '@nats-io/transport-node';
import { afterEach, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { NATS_URL, deleteNatsStreams } from '../support/brokers.js';
import { Resources } from '../support/resources.js';
import { post, startApi, userOptions } from './support.js';

const res = new Resources();
/** Run in order after each test: the API, the gateway (res), the broker, its streams. */
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

it('a cursor that is no sequence number is -32602 on NATS', async () => {
  const prefix = `cursor${Date.now().toString(36)}`;
  const broker = await NatsBroker.connect({ servers: NATS_URL, prefix });
  const running = await res.gateway({ ...userOptions(), broker });
  running.gateway.topic('lobby', { presence: true });
  const api = await startApi(running.gateway);
  closers.push(
    () => api.close(),
    () => res.cleanup(),
    () => broker.close(),
    () => deleteNatsStreams(prefix),
    async () => {
      const nc = await connectNats({ servers: NATS_URL, timeout: 2_000 });
      const jsm = await jetstreamManager(nc);
      for await (const name of jsm.streams.names()) {
        if (name.startsWith(`KV_${prefix}-`)) await jsm.streams.delete(name);
      }
      await nc.close();
    },
  );
  for (const cursor of ['abc', '-1', '1.5']) {
    const reply = await post(api.url, 'members', { topic: 'lobby', cursor });
    expect(reply.body?.error).toMatchObject({
      code: ErrorCode.InvalidParams,
      data: { field: 'cursor' },
    });
  }
});

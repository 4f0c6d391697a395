// docs/pubsub.md, "History and latest value": the history request is authorized exactly like a
// subscribe (identity.topicsOf, then the topic's authorize). A session whose identity names the
// methods it may call (identity.methodsOf) reads the history of the topics it may subscribe to,
// whatever the history method is named, as it subscribes to them: methodsOf leaves the
// subscription methods to topicsOf.
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { token, tokenIdentity } from './identity-tokens.js';
import type { TestContext } from './identity-tokens.js';
import { openRawRpc } from './raw-rpc.js';
import type { RawRpc } from './raw-rpc.js';

let running: RunningGateway<TestContext> | undefined;
const sockets: RawRpc[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.close();
  await running?.gateway.close();
  running = undefined;
});

/** A gateway whose `prices.*` keeps history, one message published on prices.BTC and prices.ETH. */
async function start(options: Pick<GatewayOptions<TestContext>, 'subscriptionMethods'> = {}) {
  running = await startGateway<TestContext>({ ...tokenIdentity(), ...options });
  const { gateway } = running;
  gateway.topic('prices.*', { history: { maxLength: 10 } });
  gateway.method('orders.list', () => []);
  gateway.method('admin.reset', () => 'reset');
  await gateway.publish('prices.BTC', { p: 1 });
  await gateway.publish('prices.ETH', { p: 2 });
  const socket = await openRawRpc(running.url, {
    authorization: `Bearer ${token({ user: 'ann', topics: ['prices.BTC'], methods: ['orders.*'] })}`,
  });
  sockets.push(socket);
  return socket;
}

describe('the history method of a session with method claims', () => {
  it('topic.history: read on a topic topicsOf allows, refused (-32004) on one it does not, as subscribe', async () => {
    const socket = await start();
    expect((await socket.request('subscribe', { topic: 'prices.BTC' })).error).toBeUndefined();
    const read = await socket.request('topic.history', { topic: 'prices.BTC', last: 1 });
    expect(read.error).toBeUndefined();
    expect(read.result).toMatchObject({ messages: [{ seq: 1, data: { p: 1 } }], lastSeq: 1 });

    const outside = await socket.request('topic.history', { topic: 'prices.ETH', last: 1 });
    expect(outside.error).toMatchObject({
      code: ErrorCode.Unauthorized,
      data: { topic: 'prices.ETH' },
    });
    // Other methods are still held to the method claims.
    expect((await socket.request('orders.list')).result).toEqual([]);
    expect((await socket.request('admin.reset')).error?.code).toBe(ErrorCode.Unauthorized);
  });

  it('a history method named in subscriptionMethods is left to topicsOf too', async () => {
    const socket = await start({ subscriptionMethods: { history: 'prices.history' } });
    const read = await socket.request('prices.history', { topic: 'prices.BTC', last: 1 });
    expect(read.error).toBeUndefined();
    expect(read.result).toMatchObject({ messages: [{ seq: 1, data: { p: 1 } }] });
    const outside = await socket.request('prices.history', { topic: 'prices.ETH', last: 1 });
    expect(outside.error).toMatchObject({ code: ErrorCode.Unauthorized });
  });
});

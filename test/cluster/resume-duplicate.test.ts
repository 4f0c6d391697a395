/**
 * Guards, in one process and deterministically, against a duplicate once seen in the cluster
 * tests on Redis: a client resuming with `since` got the last replayed message twice.
 *
 * With Redis (and NATS) a message is readable from history (the stream, read on the command
 * connection) before its live copy (PUBLISH, on the subscriber connection) has reached the
 * gateway: two connections, no order between them. The resumed subscription replays history up
 * to seq N, and the live copy of N may arrive afterwards: Delivery keeps its duplicate floor at
 * N after the replay, so that copy is not sent again. The broker below keeps the live copies
 * back until released, which is that interleaving made certain.
 */
import { afterEach, expect, it } from 'vitest';
import type { Broker, BrokerMessage, History, Retention } from '../../src/pubsub/broker.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { Resources } from '../support/resources.js';
import { openRawSocket } from '../support/gateway.js';
import { waitFor } from '../support/waiting.js';

/** A memory broker whose live deliveries lag behind its history while `lagging`. */
class LaggingBroker implements Broker {
  private readonly inner = new MemoryBroker();
  private readonly late: { message: BrokerMessage; deliver: (m: BrokerMessage) => void }[] = [];
  lagging = false;

  get ready(): boolean {
    return this.inner.ready;
  }

  publish(topic: string, payload: string, retention?: Retention): Promise<number> {
    return this.inner.publish(topic, payload, retention);
  }

  subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void> {
    return this.inner.subscribe(topic, (message) => {
      if (this.lagging) this.late.push({ message, deliver });
      else deliver(message);
    });
  }

  /** Deliver what was held back, in order, and stop lagging. */
  catchUp(): void {
    this.lagging = false;
    for (const { message, deliver } of this.late.splice(0)) deliver(message);
  }

  unsubscribe(topic: string): Promise<void> {
    return this.inner.unsubscribe(topic);
  }

  history(topic: string, afterSeq: number): Promise<History> {
    return this.inner.history(topic, afterSeq);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

const res = new Resources();
afterEach(() => res.cleanup());

interface Frame {
  result?: unknown;
  params?: { subscription: string; seq?: number; result?: unknown };
}

it('a resumed subscription gets a message once when its live copy arrives after history already had it', async () => {
  const broker = new LaggingBroker();
  const { gateway, url } = await res.gateway({ broker });
  gateway.topic('feed');
  const seqsOf = (frames: string[]) =>
    frames.map((f) => (JSON.parse(f) as Frame).params?.seq).filter((s) => s !== undefined);

  // A live subscriber keeps the topic subscribed on the broker.
  const live = await openRawSocket(url);
  res.track(live.socket);
  live.socket.send('{"jsonrpc":"2.0","method":"subscribe","params":["feed"],"id":1}');
  await live.waitFor(1);
  expect(await gateway.publish('feed', { i: 1 })).toBe(1);
  await live.waitFor(2);

  // Message 2 is in history, its live copy is on its way.
  broker.lagging = true;
  expect(await gateway.publish('feed', { i: 2 })).toBe(2);

  // A client comes back having seen seq 1: history replays 2.
  const resumed = await openRawSocket(url);
  res.track(resumed.socket);
  resumed.socket.send(
    '{"jsonrpc":"2.0","method":"subscribe","params":["feed",null,{"since":1}],"id":1}',
  );
  await waitFor(() => seqsOf(resumed.frames).includes(2), 'seq 2 replayed from history');
  expect(seqsOf(resumed.frames)).toEqual([2]);

  // The live copy of 2 arrives, then 3.
  broker.catchUp();
  expect(await gateway.publish('feed', { i: 3 })).toBe(3);
  await waitFor(() => seqsOf(resumed.frames).includes(3), 'seq 3 on the resumed subscription');
  await waitFor(() => seqsOf(live.frames).includes(3), 'seq 3 on the live subscription');

  expect(seqsOf(live.frames)).toEqual([1, 2, 3]);
  expect(seqsOf(resumed.frames)).toEqual([2, 3]); // not [2, 2, 3]
});

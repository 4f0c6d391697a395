/**
 * The Redis broker's live messages of a topic, while a read of its stream is under way: kept up
 * to MAX_QUEUED_LIVE_CHARS, past that left in the stream for one catch-up to read; and while a
 * failed read waits for its retry, a message after a hole does not start a read of its own. Every
 * message still reaches the subscriber once, in order. Real Redis; the topic subscriptions'
 * script runner is the one part held or failed by the test.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, expect, it } from 'vitest';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { RedisScriptRunner } from '../../src/pubsub/redis-script-runner.js';
import type { Script } from '../../src/pubsub/redis-script-runner.js';
import {
  MAX_QUEUED_LIVE_CHARS,
  RedisTopicSubscriptions,
} from '../../src/pubsub/redis-topic-subscriptions.js';
import { deleteRedisKeys, REDIS_URL } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { waitFor } from '../support/waiting.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const keys = `wsrpc-test-livequeue:${randomBytes(6).toString('hex')}`;
const prefix = `${keys}:`;
const closers: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
});
afterAll(async () => {
  if (redisUp) await deleteRedisKeys(REDIS_URL, keys);
});

/** Script calls that wait while `held`, and fail while `failing`; `calls` counts them. */
class TestRunner extends RedisScriptRunner {
  calls = 0;
  failing = false;
  private held: (() => void)[] | undefined;

  hold(): void {
    this.held ??= [];
  }

  letGo(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const go of held) go();
  }

  override async run(which: Script, keys: string[], args: string[]): Promise<unknown> {
    this.calls++;
    if (this.held) await new Promise<void>((resolve) => this.held!.push(resolve));
    if (this.failing) throw new Error('the command connection is down (test)');
    return super.run(which, keys, args);
  }
}

it.skipIf(!redisUp && !mustRun)(
  'live messages behind a read are bounded, and a hole waiting for a retry starts no read of its own; all arrive once, in order',
  async () => {
    const command = new Redis(REDIS_URL);
    const subscriber = new Redis(REDIS_URL);
    const publisher = new RedisBroker({ url: REDIS_URL, prefix });
    closers.push(
      () => command.quit(),
      () => subscriber.quit(),
      () => publisher.close(),
    );
    await publisher.connect();
    // Ready before subscribing, as the broker's own connections are.
    await Promise.all([command.ping(), subscriber.ping()]);
    const runner = new TestRunner(command, (cause) => cause);
    const subs = new RedisTopicSubscriptions({
      prefix,
      subscriber,
      runner,
      isClosed: () => false,
      unavailable: () => new Error('unavailable'),
      onError: () => undefined,
    });
    closers.push(() => Promise.resolve(subs.clear()));
    let live = 0;
    subscriber.on('message', (channel: string, message: string) => {
      live++;
      subs.onLive(channel, message);
    });
    const topic = 'bounded';
    const seqs: number[] = [];
    await subs.subscribe(topic, (message) => seqs.push(message.seq));
    const retention = { maxLength: 1_000, maxAgeMs: 600_000 };
    const big = 'x'.repeat(1_048_576);
    await publisher.publish(topic, '"first"', retention);
    await waitFor(() => seqs.length === 1, 'the first message');

    // A catch-up whose read is held: 20 messages of 1 MiB arrive behind it.
    runner.hold();
    subs.catchUpAll();
    for (let i = 0; i < 20; i++) await publisher.publish(topic, JSON.stringify(big), retention);
    await waitFor(() => live === 21, 'the 20 live messages');
    const kept = subs.queuedLiveChars(topic);
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThanOrEqual(MAX_QUEUED_LIVE_CHARS);

    // The reads fail: the held catch-up, then the one queued for the messages not kept. The
    // kept ones follow seq 1 and are delivered without a read.
    runner.failing = true;
    const callsBefore = runner.calls;
    runner.letGo();
    const keptCount = Math.floor(MAX_QUEUED_LIVE_CHARS / (JSON.stringify(big).length + 20));
    await waitFor(() => seqs.length === 1 + keptCount, 'the messages kept');
    await waitFor(() => runner.calls === callsBefore + 1, 'the catch-up of the rest to fail');
    // Five more, after the hole: each waits for the retry rather than reading on its own.
    for (let i = 0; i < 5; i++) await publisher.publish(topic, '"small"', retention);
    await waitFor(() => live === 26, 'the five live messages');
    expect(runner.calls).toBe(callsBefore + 1);

    // The command connection is back: the retry reads the hole and what followed it.
    runner.failing = false;
    await waitFor(() => seqs.length === 26, 'every message');
    expect(seqs).toEqual(Array.from({ length: 26 }, (_, i) => i + 1));
    expect(subs.queuedLiveChars(topic)).toBe(0);
  },
);

import { afterEach, describe, expect, it } from 'vitest';
import type { SlowConsumerPolicy } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import {
  countedMessages,
  expectConsistentGaps,
  expectHealthyGotEverything,
} from '../support/slow-consumer.js';
import { RawRpc } from '../support/raw-rpc.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { waitUntil, within } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const PAYLOAD_BYTES = 64 * 1024;
const HIGH_WATER_MARK = 256 * 1024;
/** Keep publishing until the stalled socket has been under pressure for this many messages... */
const MESSAGES_UNDER_PRESSURE = 40;
/** ...and at least this many were published (about 20 MiB, several times the loopback buffers). */
const MIN_MESSAGES = 300;
/** Far past any kernel socket buffer on loopback; reaching it fails the test. */
const MAX_MESSAGES = 3_000;

const pad = 'x'.repeat(PAYLOAD_BYTES);

/** The largest frame one message can be on the wire: text plus a 10-byte unmasked header. */
function oneMessageBytes(): number {
  const text = JSON.stringify({
    jsonrpc: '2.0',
    method: 'subscription',
    params: {
      subscription: '0xffffffff',
      missed: 99_999_999,
      seq: 99_999_999,
      result: { i: 99_999_999, pad },
    },
  });
  return Buffer.byteLength(text) + 10;
}

async function setUp(policy: SlowConsumerPolicy, positions = false) {
  const { gateway, url } = await res.gateway();
  gateway.topic('bulk', { slowConsumer: policy, highWaterMark: HIGH_WATER_MARK });

  const healthy = await RawRpc.open(url);
  res.track(healthy.socket);
  const before = sessionIds(gateway);
  const stalled = await RawRpc.open(url);
  res.track(stalled.socket);
  const stalledSession = newSession(gateway, before);

  const healthyId = (await healthy.request('subscribe', ['bulk'])).result as string;
  // With `positions`, as this project's client subscribes: told its position, and gaps.
  const params = positions ? ['bulk', null, { position: true }] : ['bulk'];
  const stalledId = (await stalled.request('subscribe', params)).result as string;
  expect(gateway.pubsub.topics()).toEqual({ bulk: 2 });

  // Stop reading: the kernel buffers fill, then the server's own write buffer grows.
  stalled.socket.pause();
  return { gateway, healthy, stalled, stalledSession, healthyId, stalledId };
}

/**
 * Publish one message at a time, waiting until the healthy subscriber has it
 * (so the healthy socket never builds a backlog), and sample the stalled
 * socket's buffered bytes after each publish. Stops once the stalled socket
 * has been at or above the high-water mark (or closed) for a while.
 */
async function publishUntilPressure(
  ctx: Awaited<ReturnType<typeof setUp>>,
): Promise<{ published: number; maxBuffered: number }> {
  const { gateway, healthy, stalledSession, healthyId } = ctx;
  const limit = HIGH_WATER_MARK + oneMessageBytes();
  let maxBuffered = 0;
  let underPressure = 0;
  let i = 0;
  while (underPressure < MESSAGES_UNDER_PRESSURE || i < MIN_MESSAGES) {
    if (i >= MAX_MESSAGES) throw new Error(`no back-pressure after ${i} messages`);
    i++;
    expect(await gateway.publish('bulk', { i, pad })).toBe(i);
    const buffered = stalledSession.peer.bufferedAmount;
    maxBuffered = Math.max(maxBuffered, buffered);
    expect(buffered, `buffered bytes after message ${i}`).toBeLessThanOrEqual(limit);
    const count = i;
    await healthy.until(
      () => healthy.notifications(healthyId).length >= count,
      `healthy subscriber to receive message ${count}`,
    );
    if (buffered >= HIGH_WATER_MARK || stalledSession.isClosed) underPressure++;
  }
  return { published: i, maxBuffered };
}

/**
 * Under 'drop': publish until the stalled socket is under pressure, check that the healthy
 * subscriber got everything while the stalled one got less and the gateway dropped some.
 */
async function publishUntilDropping(ctx: Awaited<ReturnType<typeof setUp>>): Promise<number> {
  const { gateway, healthy, stalled, healthyId, stalledId } = ctx;
  const { published, maxBuffered } = await publishUntilPressure(ctx);
  expect(maxBuffered).toBeGreaterThanOrEqual(HIGH_WATER_MARK);
  // The healthy subscriber got all of it while the other one was still stalled.
  expect(stalled.socket.isPaused).toBe(true);
  expectHealthyGotEverything(healthy, healthyId, published);
  expect(stalled.notifications(stalledId).length).toBeLessThan(published);
  expect(gateway.pubsub.stats.dropped).toBeGreaterThan(0);
  return published;
}

/** Publish message `published + 1` and wait for the stalled subscriber to have it. */
async function publishOneMore(
  ctx: Awaited<ReturnType<typeof setUp>>,
  published: number,
): Promise<number> {
  const { gateway, stalled, stalledId } = ctx;
  const last = published + 1;
  expect(await gateway.publish('bulk', { i: last, pad })).toBe(last);
  await stalled.until(
    () => stalled.notifications(stalledId).some((m) => m.seq === last),
    'the message published after the stall',
    15_000,
  );
  return last;
}

describe('slow consumers', () => {
  it("'drop': the stalled subscriber skips messages and is told how many it missed with the next message", async () => {
    const ctx = await setUp('drop');
    const { gateway, stalled, stalledSession, stalledId } = ctx;

    const published = await publishUntilDropping(ctx);

    stalled.socket.resume();
    await waitUntil(
      () => stalledSession.peer.bufferedAmount === 0,
      'the stalled socket to drain',
      15_000,
    );
    const last = await publishOneMore(ctx, published);

    const got = stalled.notifications(stalledId);
    expect(got.at(-1)!.seq).toBe(last);
    expect(got.at(-1)!.missed).toBeGreaterThan(0);
    expectConsistentGaps(got);
    const missed = got.reduce((sum, m) => sum + (m.missed ?? 0), 0);
    expect(missed + got.length).toBe(last);
    expect(gateway.pubsub.stats.dropped).toBe(missed);
    expect(gateway.pubsub.stats.slowConsumerDisconnects).toBe(0);
    expect(stalledSession.isClosed).toBe(false);
  });

  it("'drop', tracking positions (as this project's client does): once the stalled socket drains, it is told how many were skipped with nothing more published", async () => {
    const ctx = await setUp('drop', true);
    const { gateway, stalled, stalledSession, stalledId } = ctx;

    const published = await publishUntilDropping(ctx);

    // The topic goes quiet: the drain alone tells what was skipped.
    stalled.socket.resume();
    await stalled.until(
      () => {
        const { got, lost } = countedMessages(stalled.notifications(stalledId));
        return got + lost === published;
      },
      'every message received or told lost, nothing more published',
      15_000,
    );
    const told = stalled.notifications(stalledId);
    expect(told.at(-1)!.gap).toBeGreaterThan(0);
    expect(told.at(-1)!.epoch).toBeTypeOf('string');
    expectConsistentGaps(told);
    expect(countedMessages(told).lost).toBe(gateway.pubsub.stats.dropped);

    // The next message follows on, nothing told twice.
    const last = await publishOneMore(ctx, published);
    const got = stalled.notifications(stalledId);
    expect(got.at(-1)).toMatchObject({ seq: last });
    expect(got.at(-1)!.missed).toBeUndefined();
    expectConsistentGaps(got);
    const { got: received, lost } = countedMessages(got);
    expect(received + lost).toBe(last);
    expect(gateway.pubsub.stats.dropped).toBe(lost);
    expect(gateway.pubsub.stats.slowConsumerDisconnects).toBe(0);
    expect(stalledSession.isClosed).toBe(false);
  });

  it("'keep-latest': the stalled subscriber ends up with the last message published", async () => {
    const ctx = await setUp('keep-latest');
    const { gateway, healthy, stalled, stalledSession, healthyId, stalledId } = ctx;

    const { published, maxBuffered } = await publishUntilPressure(ctx);
    expect(maxBuffered).toBeGreaterThanOrEqual(HIGH_WATER_MARK);
    expect(stalled.socket.isPaused).toBe(true);
    expectHealthyGotEverything(healthy, healthyId, published);
    expect(stalled.notifications(stalledId).length).toBeLessThan(published);

    // Nothing more is published: the held message must come out once the socket drains.
    stalled.socket.resume();
    await stalled.until(
      () => stalled.notifications(stalledId).some((m) => m.seq === published),
      `the last message (seq ${published})`,
      15_000,
    );
    await stalled.barrier();

    const got = stalled.notifications(stalledId);
    expect(got.at(-1)!.seq).toBe(published);
    expect(got.at(-1)!.missed).toBeGreaterThan(0);
    expectConsistentGaps(got);
    const missed = got.reduce((sum, m) => sum + (m.missed ?? 0), 0);
    expect(missed + got.length).toBe(published);
    expect(gateway.pubsub.stats.dropped).toBe(missed);
    expect(gateway.pubsub.stats.slowConsumerDisconnects).toBe(0);
    expect(stalledSession.isClosed).toBe(false);
  });

  it("'disconnect': the stalled session is closed with 1013 and the healthy one carries on", async () => {
    const ctx = await setUp('disconnect');
    const { gateway, healthy, stalled, stalledSession, healthyId } = ctx;

    const { published } = await publishUntilPressure(ctx);
    expect(stalledSession.isClosed).toBe(true);
    expect((await stalledSession.closed).code).toBe(1013);
    expect(gateway.pubsub.stats.slowConsumerDisconnects).toBe(1);
    expect(gateway.pubsub.stats.dropped).toBe(0);
    expectHealthyGotEverything(healthy, healthyId, published);

    // The stalled session is gone from the topic; the healthy subscriber keeps receiving.
    await waitUntil(() => !gateway.sessions.has(stalledSession.id), 'the session to be released');
    expect(gateway.pubsub.topics()).toEqual({ bulk: 1 });
    expect(gateway.pubsub.subscriptionCount(stalledSession)).toBe(0);
    for (let i = published + 1; i <= published + 5; i++) {
      expect(await gateway.publish('bulk', { i, pad })).toBe(i);
    }
    await healthy.until(
      () => healthy.notifications(healthyId).length === published + 5,
      'messages published after the disconnect',
    );
    expectHealthyGotEverything(healthy, healthyId, published + 5);
    expect(gateway.pubsub.stats.slowConsumerDisconnects).toBe(1);

    // The stalled client does see its connection end once it reads again.
    stalled.socket.resume();
    await within(stalled.closed, 'the stalled client to see its connection end', 15_000);
  });
});

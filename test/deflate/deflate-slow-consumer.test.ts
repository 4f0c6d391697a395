import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SlowConsumerPolicy } from '../../src/index.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { httpGet } from '../support/network.js';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { expectConsistentGaps, expectHealthyGotEverything } from '../support/slow-consumer.js';
import { waitUntil, within } from '../support/waiting.js';
import { watchEventLoop } from './event-loop-watchdog.js';

/**
 * test/pubsub/slow-consumer.test.ts with permessage-deflate on: the stalled subscriber's socket
 * also carries replies ws compresses, so waiting for it to drain means waiting for bytes held in
 * ws's sender as well as in the socket.
 */

const res = new Resources();
afterEach(() => res.cleanup());

// The gateway runs in this process: should its event loop stop, the watchdog fails the file.
let stopWatching: () => void;
beforeAll(() => (stopWatching = watchEventLoop()));
afterAll(() => stopWatching());

const HIGH_WATER_MARK = 256 * 1024;
/** Keep publishing until the stalled socket has been under pressure for this many messages... */
const MESSAGES_UNDER_PRESSURE = 40;
/** ...and at least this many were published (several times the loopback buffers). */
const MIN_MESSAGES = 300;
/** Far past any kernel socket buffer on loopback; reaching it fails the test. */
const MAX_MESSAGES = 3_000;
/** Calls sent as the stalled client reads again; each reply keeps ws's compressor busy a while. */
const CALLS = 6;

/** 64 KiB of text that compresses little, so compressed frames still fill the socket. */
const pad = randomBytes(48 * 1024).toString('base64');
/** About 1 MiB of text that compresses little: what the method called during the stall answers. */
const BLOB = randomBytes(768 * 1024).toString('base64');

async function setUp(policy: SlowConsumerPolicy, maxBufferedBytes?: number) {
  const limits = maxBufferedBytes === undefined ? {} : { maxBufferedBytes };
  const { gateway, url, httpUrl } = await res.gateway({ perMessageDeflate: true, limits });
  gateway.topic('bulk', { slowConsumer: policy, highWaterMark: HIGH_WATER_MARK });
  gateway.method('blob', () => BLOB);

  const healthy = await RawRpc.open(url);
  res.track(healthy.socket);
  const before = sessionIds(gateway);
  const stalled = await RawRpc.open(url);
  res.track(stalled.socket);
  const stalledSession = newSession(gateway, before);
  for (const client of [healthy, stalled]) {
    expect(client.socket.extensions).toContain('permessage-deflate');
  }

  const healthyId = (await healthy.request('subscribe', ['bulk'])).result as string;
  const stalledId = (await stalled.request('subscribe', ['bulk'])).result as string;
  expect(gateway.pubsub.topics()).toEqual({ bulk: 2 });

  // Stop reading: the kernel buffers fill, then the server's own write buffer grows.
  stalled.socket.pause();
  return { gateway, url, httpUrl, healthy, stalled, stalledSession, healthyId, stalledId };
}

type Context = Awaited<ReturnType<typeof setUp>>;

/**
 * Publish one message at a time, waiting until the healthy subscriber has it, until the stalled
 * socket has been at or above the high-water mark (or closed) for a while.
 */
async function publishUntilPressure(ctx: Context): Promise<number> {
  const { gateway, healthy, stalledSession, healthyId } = ctx;
  let underPressure = 0;
  let i = 0;
  while (underPressure < MESSAGES_UNDER_PRESSURE || i < MIN_MESSAGES) {
    if (i >= MAX_MESSAGES) throw new Error(`no back-pressure after ${i} messages`);
    i++;
    expect(await gateway.publish('bulk', { i, pad })).toBe(i);
    const count = i;
    await healthy.until(
      () => healthy.notifications(healthyId).length >= count,
      `healthy subscriber to receive message ${count}`,
    );
    if (stalledSession.peer.bufferedAmount >= HIGH_WATER_MARK || stalledSession.isClosed) {
      underPressure++;
    }
  }
  return i;
}

/**
 * The stalled client reads again and at once asks for CALLS replies of 1 MiB (one TCP write):
 * while its socket drains, ws holds those replies to compress them.
 */
function resumeWithCalls(stalled: RawRpc): string[] {
  const ids = Array.from({ length: CALLS }, (_, k) => `blob-${k}`);
  stalled.socket.resume();
  const raw = (stalled.socket as unknown as { _socket: Duplex })._socket;
  raw.cork();
  for (const id of ids) stalled.send({ jsonrpc: '2.0', id, method: 'blob' });
  raw.uncork();
  return ids;
}

async function expectReplies(stalled: RawRpc, ids: string[]): Promise<void> {
  for (const id of ids) expect((await stalled.response(id, 15_000)).result).toBe(BLOB);
}

/** The gateway stays live: /livez answers and the healthy client's call is answered. */
async function expectLive({ httpUrl, healthy }: Context): Promise<void> {
  expect((await within(httpGet(`${httpUrl}/livez`), '/livez')).status).toBe(200);
  expect((await healthy.request('rpc.ping')).result).toBe('pong');
}

describe('slow consumers with permessage-deflate', () => {
  it("'drop': the stalled subscriber skips messages, is told how many it missed, and gets its replies", async () => {
    const ctx = await setUp('drop');
    const { gateway, healthy, stalled, stalledSession, healthyId, stalledId } = ctx;

    const published = await publishUntilPressure(ctx);
    expectHealthyGotEverything(healthy, healthyId, published);
    expect(gateway.pubsub.stats.dropped).toBeGreaterThan(0);

    const ids = resumeWithCalls(stalled);
    // Published while the replies wait to be compressed and the socket drains.
    const last = published + 1;
    expect(await gateway.publish('bulk', { i: last, pad })).toBe(last);
    await expectLive(ctx);
    await expectReplies(stalled, ids);
    await waitUntil(
      () => stalledSession.peer.bufferedAmount === 0,
      'the stalled socket to drain',
      15_000,
    );
    const after = last + 1;
    expect(await gateway.publish('bulk', { i: after, pad })).toBe(after);
    await stalled.until(
      () => stalled.notifications(stalledId).some((m) => m.seq === after),
      'the message published after the stall',
      15_000,
    );

    const got = stalled.notifications(stalledId);
    expect(got.at(-1)!.seq).toBe(after);
    expectConsistentGaps(got);
    const missed = got.reduce((sum, m) => sum + (m.missed ?? 0), 0);
    expect(missed).toBeGreaterThan(0);
    expect(missed + got.length).toBe(after);
    expect(gateway.pubsub.stats.dropped).toBe(missed);
    expect(gateway.pubsub.stats.slowConsumerDisconnects).toBe(0);
    expect(stalledSession.isClosed).toBe(false);
    await expectLive(ctx);
  });

  it.each([
    ['', undefined],
    [' (reading never paused: only the wait for the socket to drain)', 0],
  ])(
    "'keep-latest': the stalled subscriber ends up with the last message published, and gets its replies%s",
    async (_, maxBufferedBytes) => {
      const ctx = await setUp('keep-latest', maxBufferedBytes);
      const { gateway, healthy, stalled, stalledSession, healthyId, stalledId } = ctx;

      const published = await publishUntilPressure(ctx);
      expectHealthyGotEverything(healthy, healthyId, published);
      expect(stalled.notifications(stalledId).length).toBeLessThan(published);

      const ids = resumeWithCalls(stalled);
      // Held while the replies wait to be compressed: it comes out once all of it has drained.
      const last = published + 1;
      expect(await gateway.publish('bulk', { i: last, pad })).toBe(last);
      await expectLive(ctx);
      await expectReplies(stalled, ids);
      await stalled.until(
        () => stalled.notifications(stalledId).some((m) => m.seq === last),
        `the last message (seq ${last})`,
        15_000,
      );
      await stalled.barrier();

      const got = stalled.notifications(stalledId);
      expect(got.at(-1)!.seq).toBe(last);
      expect(got.at(-1)!.missed).toBeGreaterThan(0);
      expectConsistentGaps(got);
      const missed = got.reduce((sum, m) => sum + (m.missed ?? 0), 0);
      expect(missed + got.length).toBe(last);
      expect(gateway.pubsub.stats.dropped).toBe(missed);
      expect(gateway.pubsub.stats.slowConsumerDisconnects).toBe(0);
      expect(stalledSession.isClosed).toBe(false);
      await expectLive(ctx);
    },
  );

  it("'disconnect': the stalled session is closed with 1013 and the healthy one carries on", async () => {
    const ctx = await setUp('disconnect');
    const { gateway, healthy, stalled, stalledSession, healthyId } = ctx;

    const published = await publishUntilPressure(ctx);
    expect(stalledSession.isClosed).toBe(true);
    expect((await stalledSession.closed).code).toBe(1013);
    expect(gateway.pubsub.stats.slowConsumerDisconnects).toBe(1);
    expect(gateway.pubsub.stats.dropped).toBe(0);
    expectHealthyGotEverything(healthy, healthyId, published);

    await waitUntil(() => !gateway.sessions.has(stalledSession.id), 'the session to be released');
    expect(gateway.pubsub.topics()).toEqual({ bulk: 1 });
    // The healthy client, meanwhile, has its own replies compressed while broadcasts go on.
    const ids = resumeWithCalls(healthy);
    for (let i = published + 1; i <= published + 5; i++) {
      expect(await gateway.publish('bulk', { i, pad })).toBe(i);
    }
    await expectReplies(healthy, ids);
    await healthy.until(
      () => healthy.notifications(healthyId).length === published + 5,
      'messages published after the disconnect',
    );
    expectHealthyGotEverything(healthy, healthyId, published + 5);

    // The stalled client does see its connection end once it reads again.
    stalled.socket.resume();
    await within(stalled.closed, 'the stalled client to see its connection end', 15_000);
    await expectLive(ctx);
  });
});

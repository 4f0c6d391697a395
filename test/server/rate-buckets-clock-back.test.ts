/**
 * The wall clock stepping back (an NTP step, a VM restored from a snapshot) puts no rate bucket
 * in debt. Buckets read a monotonic clock unless given one; a given clock that goes back counts
 * as no time passed. The wall clock cannot be stepped for real in a test, so the gateway tests
 * make Date.now of this process read ten minutes earlier once the buckets are in use.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CreationBudget } from '../../src/pubsub/creation-budget.js';
import { AddressBudget, AddressBudgets } from '../../src/server/address-budgets.js';
import { RateLimit, TokenBucket, monotonicMs } from '../../src/server/token-bucket.js';
import { Resources } from '../support/resources.js';
import { attemptUpgrade, openRaw } from '../support/sockets.js';
import { postRpc } from './http-post.js';

const res = new Resources();
afterEach(async () => {
  vi.restoreAllMocks();
  await res.cleanup();
});

const TEN_MINUTES_MS = 10 * 60 * 1000;

/** A clock moved by hand, from an epoch-like time. */
function handClock(start = 1_764_633_600_000): { now: () => number; move: (ms: number) => void } {
  let t = start;
  return { now: () => t, move: (ms) => (t += ms) };
}

/**
 * Date.now as a wall clock the test steps back: made before the gateway, so that whatever
 * holds Date.now itself (a default clock taken as a function) reads the stepped clock too.
 */
function steppableWallClock(): { stepBack(ms: number): void } {
  const realNow = Date.now.bind(Date);
  let behind = 0;
  vi.spyOn(Date, 'now').mockImplementation(() => realNow() - behind);
  return { stepBack: (ms) => (behind += ms) };
}

describe('a clock that goes back', () => {
  it("the buckets' default clock never goes back, and goes on by the wall clock's steps forward", () => {
    let wall = 1_764_633_600_000;
    vi.spyOn(Date, 'now').mockImplementation(() => wall);
    const start = monotonicMs();
    wall += 250;
    expect(monotonicMs() - start).toBe(250);
    wall -= 3_600_000;
    expect(monotonicMs() - start).toBe(250);
    wall += 40;
    expect(monotonicMs() - start).toBe(290);
    wall -= 1;
    wall -= 5;
    expect(monotonicMs() - start).toBe(290);
    wall += 10;
    expect(monotonicMs() - start).toBe(300);
  });

  it('counts as no time passed: the bucket keeps its tokens, and refills from the new reading', () => {
    const clock = handClock();
    const bucket = new TokenBucket(20, 100, clock.now);
    expect(bucket.available()).toBe(100);
    clock.move(-3_600_000);
    expect(bucket.available()).toBe(100);
    expect(bucket.retryAfterSeconds()).toBe(1);
    for (let i = 0; i < 100; i++) expect(bucket.take()).toBe(true);
    expect(bucket.take()).toBe(false);
    clock.move(1_000);
    expect(bucket.available()).toBe(20);
  });

  it("puts no debt on a broker's budget of new topics, by default or given", () => {
    const clock = handClock();
    const given = new CreationBudget({ newTopicsPerSecond: 10, newTopicsBurst: 2 }, clock.now);
    clock.move(-TEN_MINUTES_MS);
    expect(given.available()).toBe(true);
    given.spend();
    given.spend();
    expect(given.available()).toBe(false);
    clock.move(100);
    expect(given.available()).toBe(true);
    const wall = steppableWallClock();
    const byDefault = new CreationBudget({ newTopicsPerSecond: 10, newTopicsBurst: 2 });
    wall.stepBack(TEN_MINUTES_MS);
    expect(byDefault.available()).toBe(true);
  });

  it("puts no debt on an address's budget kept after its last connection let go", () => {
    const clock = handClock();
    const limit = new RateLimit(10, 10, clock.now);
    const budgets = new AddressBudgets(limit, 100, (group) => new AddressBudget(limit, group));
    const entry = budgets.acquire('192.0.2.1')!;
    for (let i = 0; i < 10; i++) expect(entry.take()).toBe(true);
    budgets.release(entry);
    clock.move(-TEN_MINUTES_MS);
    expect(budgets.peek('192.0.2.1')!.available()).toBe(0);
    clock.move(1_000);
    expect(budgets.peek('192.0.2.1')!.available()).toBe(10);
  });
});

describe('the wall clock stepped back ten minutes under a running gateway', () => {
  it('with the default limits: reconnects are admitted, /livez, POST /rpc and calls on an open connection are answered', async () => {
    const wallClock = steppableWallClock();
    const { gateway, url, httpUrl } = await res.gateway();
    gateway.method('echo', (params) => params);
    const raw = await openRaw(res, url);
    expect((await raw.request('echo', [1])).result).toEqual([1]);
    expect((await fetch(`${httpUrl}/livez`)).status).toBe(200);
    expect((await postRpc(`${httpUrl}/rpc`, { id: 1, method: 'echo', params: [1] })).status).toBe(
      200,
    );

    wallClock.stepBack(TEN_MINUTES_MS);

    expect(await attemptUpgrade(res, url)).toBe('open');
    const livez = await fetch(`${httpUrl}/livez`);
    expect({ status: livez.status, retryAfter: livez.headers.get('retry-after') }).toEqual({
      status: 200,
      retryAfter: null,
    });
    const post = await postRpc(`${httpUrl}/rpc`, { id: 2, method: 'echo', params: [2] });
    expect({ status: post.status, result: post.reply?.result }).toEqual({
      status: 200,
      result: [2],
    });
    // The connection's byte budget (bytesPerSecond, bytesPerSecondPerIp) in debt would stop
    // the gateway reading it: the call would never be answered.
    expect((await raw.request('echo', [3])).result).toEqual([3]);
  });

  it('with the byte budgets off: calls and subscribes to new topics are not refused -32003', async () => {
    const wallClock = steppableWallClock();
    const { gateway, url } = await res.gateway({
      limits: { bytesPerSecond: 0, bytesPerSecondPerIp: 0 },
    });
    gateway.method('echo', (params) => params);
    gateway.topic('room.*');
    const raw = await openRaw(res, url);
    expect((await raw.request('echo', [1])).result).toEqual([1]);
    expect((await raw.request('subscribe', ['room.1'])).error).toBeUndefined();

    wallClock.stepBack(TEN_MINUTES_MS);

    expect((await raw.request('echo', [2])).error).toBeUndefined();
    expect((await raw.request('subscribe', ['room.2'])).error).toBeUndefined();
  });
});

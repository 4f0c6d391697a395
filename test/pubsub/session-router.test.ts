/**
 * SessionRouter's retries while the broker is down: they stop once nobody needs them, and a
 * user who leaves is unsubscribed even when the subscribe seemed to fail (it may have reached
 * the broker all the same); once the link is back, what was said meanwhile is read once. The
 * broker is a stand-in (down throughout, or until it comes back): what is under test is the
 * router's own bookkeeping (the real outage is in redis-gateway.test.ts).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Broker, History } from '../../src/pubsub/broker.js';
import { silentLogger } from '../../src/peer/logger.js';
import { SessionRouter } from '../../src/server/session-router.js';

class DownBroker implements Broker {
  get ready(): boolean {
    return false;
  }
  readonly unsubscribed: string[] = [];
  publish(): Promise<number> {
    return Promise.reject(new Error('down'));
  }
  subscribe(): Promise<void> {
    return Promise.reject(new Error('down'));
  }
  unsubscribe(topic: string): Promise<void> {
    this.unsubscribed.push(topic);
    return Promise.resolve();
  }
  history(): Promise<History> {
    return Promise.reject(new Error('down'));
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const local = { notifySession: () => false, notifyUser: () => 0 };

afterEach(() => {
  vi.useRealTimers();
});

describe('SessionRouter while the broker is down', () => {
  it('stops retrying once the user has left, and unsubscribes the user anyway', async () => {
    vi.useFakeTimers();
    const broker = new DownBroker();
    const router = new SessionRouter(broker, 'n1', local, silentLogger);
    router.userConnected('alice');
    expect(await router.listeningFor('alice')).toBe(false);
    expect(vi.getTimerCount()).toBe(1); // the retry

    router.userDisconnected('alice');
    expect(broker.unsubscribed).toEqual(['$user.alice']);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('schedules nothing after stop()', async () => {
    vi.useFakeTimers();
    const broker = new DownBroker();
    const router = new SessionRouter(broker, 'n1', local, silentLogger);
    router.userConnected('bob');
    await router.stop();
    expect(await router.listeningFor('bob')).toBe(false);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(vi.getTimerCount()).toBe(0);
  });
});

/**
 * Down until `up()`, which tells the router its link is back (Broker.onRelinked); once
 * `hanging`, a subscribe waits for `up()` instead of failing (a try under way as the link comes
 * back). `subscribes`: how many were asked.
 */
class ReturningBroker extends DownBroker {
  private linkUp = false;
  hanging = false;
  subscribes = 0;
  private readonly listeners: (() => void)[] = [];
  private readonly waiting: (() => void)[] = [];
  override get ready(): boolean {
    return this.linkUp;
  }
  override subscribe(): Promise<void> {
    this.subscribes++;
    if (this.linkUp) return Promise.resolve();
    if (this.hanging) return new Promise((resolve) => this.waiting.push(resolve));
    return Promise.reject(new Error('down'));
  }
  onRelinked(listener: () => void): () => void {
    this.listeners.push(listener);
    return () => undefined;
  }
  up(): void {
    this.linkUp = true;
    for (const resolve of this.waiting.splice(0)) resolve();
    for (const listener of this.listeners) listener();
  }
}

/** A router on `broker` counting the runs of its relinked hook. */
function countingRelinks(broker: Broker) {
  const counted = { runs: 0 };
  const router = new SessionRouter(broker, 'n1', local, silentLogger, {
    relinked: () => {
      counted.runs++;
      return Promise.resolve(true);
    },
  });
  return { router, counted };
}

/** Let every relinked run under way, or queued behind one, have its turn. */
async function settleRuns(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('SessionRouter when the broker comes back', () => {
  it('reads what was said meanwhile once, as its own subscriptions are in place', async () => {
    const broker = new ReturningBroker();
    const { router, counted } = countingRelinks(broker);
    await router.start();
    expect(router.pending).toBe(true);
    broker.up();
    await vi.waitFor(() => expect(router.listening).toBe(true));
    await settleRuns();
    expect(counted.runs).toBe(1);
    await router.stop();
  });

  it('reads it once too when the link is back during a retried try', async () => {
    const broker = new ReturningBroker();
    const { router, counted } = countingRelinks(broker);
    await router.start();
    broker.hanging = true;
    // The retry (after 250 ms) is under way, waiting on the broker.
    await vi.waitFor(() => expect(broker.subscribes).toBe(2), { timeout: 5_000 });
    broker.up();
    await vi.waitFor(() => expect(router.listening).toBe(true));
    await settleRuns();
    expect(counted.runs).toBe(1);
    await router.stop();
  });
});

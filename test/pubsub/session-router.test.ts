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

/** Down until `up()`, which tells the router its link is back (Broker.onRelinked). */
class ReturningBroker extends DownBroker {
  private linkUp = false;
  private readonly listeners: (() => void)[] = [];
  override get ready(): boolean {
    return this.linkUp;
  }
  override subscribe(): Promise<void> {
    return this.linkUp ? Promise.resolve() : Promise.reject(new Error('down'));
  }
  onRelinked(listener: () => void): () => void {
    this.listeners.push(listener);
    return () => undefined;
  }
  up(): void {
    this.linkUp = true;
    for (const listener of this.listeners) listener();
  }
}

describe('SessionRouter when the broker comes back', () => {
  it('reads what was said meanwhile once, as its own subscriptions are in place', async () => {
    const broker = new ReturningBroker();
    let runs = 0;
    const router = new SessionRouter(broker, 'n1', local, silentLogger, {
      relinked: () => {
        runs++;
        return Promise.resolve(true);
      },
    });
    await router.start();
    expect(router.pending).toBe(true);
    broker.up();
    await vi.waitFor(() => expect(router.listening).toBe(true));
    // Every run under way, or queued behind one, has had its turn.
    for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(runs).toBe(1);
    await router.stop();
  });
});

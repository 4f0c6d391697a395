/**
 * SessionRouter's retries while the broker is down: they stop once nobody needs them, and a
 * user who leaves is unsubscribed even when the subscribe seemed to fail (it may have reached
 * the broker all the same). The broker is a stand-in that is down throughout: what is under
 * test is the router's own bookkeeping (the real outage is in redis-gateway.test.ts).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Broker, History } from '../../src/pubsub/broker.js';
import { silentLogger } from '../../src/peer/logger.js';
import { SessionRouter } from '../../src/server/session-router.js';

class DownBroker implements Broker {
  readonly ready = false;
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

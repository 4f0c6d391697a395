import type { Subscription } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { backoffDelay, defaultBackoff } from '../../src/client/backoff.js';
import type { BackoffOptions } from '../../src/client/backoff.js';
import type { ConnectionState } from '../../src/client/connection-state.js';
import type { Session } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { freePort } from '../support/network.js';
import { sleep } from '../support/promises.js';
import { waitUntil } from '../support/waiting.js';
import { captureLogger, logged } from '../support/logging.js';
import { sumGateway } from '../support/client.js';

const res = new Resources();
const subscriptions: Subscription[] = [];
afterEach(async () => {
  for (const s of subscriptions.splice(0)) s.unsubscribe();
  await res.cleanup();
});

const options: BackoffOptions = {
  initialDelayMs: 100,
  maxDelayMs: 1_000,
  factor: 2,
  jitter: 0.5,
  resetAfterMs: 5_000,
};

describe('backoffDelay', () => {
  it('grows by the factor from the initial delay', () => {
    const none = () => 0;
    expect([0, 1, 2, 3].map((n) => backoffDelay(n, options, none))).toEqual([100, 200, 400, 800]);
  });

  it('is capped at maxDelayMs, however many attempts', () => {
    const none = () => 0;
    expect(backoffDelay(4, options, none)).toBe(1_000);
    expect(backoffDelay(50, options, none)).toBe(1_000);
    expect(backoffDelay(10_000, options, none)).toBe(1_000);
  });

  it('jitter takes off at most its fraction of the delay', () => {
    for (const attempt of [0, 2, 9]) {
      const base = backoffDelay(attempt, options, () => 0);
      expect(backoffDelay(attempt, options, () => 0.999_999)).toBeGreaterThanOrEqual(base * 0.5);
      expect(backoffDelay(attempt, options, () => 0.5)).toBe(Math.round(base * 0.75));
      for (let i = 0; i < 100; i++) {
        const delay = backoffDelay(attempt, options);
        expect(delay).toBeGreaterThanOrEqual(base * 0.5);
        expect(delay).toBeLessThanOrEqual(base);
      }
    }
  });

  it('clamps jitter to 0..1', () => {
    expect(backoffDelay(0, { ...options, jitter: 5 }, () => 0.5)).toBe(50);
    expect(backoffDelay(0, { ...options, jitter: -1 }, () => 0.5)).toBe(100);
  });

  it('defaults: 250 ms doubling to 10 s, half jittered, reset after 5 s open', () => {
    expect(defaultBackoff).toEqual({
      initialDelayMs: 250,
      maxDelayMs: 10_000,
      factor: 2,
      jitter: 0.5,
      resetAfterMs: 5_000,
    });
  });
});

/** The delays the client chose, from its debug log. */
const delaysOf = (records: ReturnType<typeof captureLogger>['records']) =>
  logged(records, 'reconnect scheduled').map((r) => (r.obj as { delayMs: number }).delayMs);

describe('client backoff', () => {
  it('grows when connections open and drop at once (a server closing with 1013)', async () => {
    const { gateway, url } = await sumGateway(res);
    subscriptions.push(
      gateway.connected$.subscribe((session: Session) => session.close(1013, 'try again later')),
    );
    const { logger, records } = captureLogger();
    const client = res.client(url, {
      logger,
      reconnect: { initialDelayMs: 5, maxDelayMs: 40, factor: 2, jitter: 0, resetAfterMs: 60_000 },
    });
    await waitUntil(() => delaysOf(records).length >= 6, 'six reconnects');
    await client.close();
    expect(delaysOf(records).slice(0, 6)).toEqual([5, 10, 20, 40, 40, 40]);
  });

  it('resets once a connection has stayed open for resetAfterMs', async () => {
    const { gateway, url } = await sumGateway(res);
    let connections = 0;
    let stable: Session | undefined;
    subscriptions.push(
      gateway.connected$.subscribe((session: Session) => {
        // The first three drop at once, the fourth stays, the ones after drop again.
        if (++connections === 4) stable = session;
        else session.close(1013, 'try again later');
      }),
    );
    const { logger, records } = captureLogger();
    const client = res.client(url, {
      logger,
      reconnect: { initialDelayMs: 5, maxDelayMs: 400, factor: 2, jitter: 0, resetAfterMs: 1_000 },
    });
    await waitUntil(() => stable !== undefined, 'the fourth connection');
    // Well past resetAfterMs; the connections dropped at once stay open far less than it, even
    // on a loaded machine.
    await sleep(1_200);
    stable!.close(1013, 'try again later');
    await waitUntil(() => delaysOf(records).length >= 5, 'five reconnects');
    await client.close();
    expect(delaysOf(records).slice(0, 5)).toEqual([5, 10, 20, 5, 10]);
  });

  it('state$ does not repeat a state while attempts keep failing', async () => {
    const dead = `ws://127.0.0.1:${await freePort()}/rpc`;
    const { logger, records } = captureLogger();
    const client = res.client(dead, { logger, reconnect: { initialDelayMs: 1, maxDelayMs: 5 } });
    const states: ConnectionState[] = [];
    subscriptions.push(client.state$.subscribe((s) => states.push(s)));
    await waitUntil(() => delaysOf(records).length >= 3, 'three failed attempts');
    expect(states).toEqual(['connecting']);
    await client.close();
    expect(states).toEqual(['connecting', 'closed']);
  });
});

/*
 * The server's request to reconnect (rpc.reconnect) as the client answers it: at once while the
 * backoff stands at its start, the move growing the backoff (though not counted against
 * `reconnect.maxAttempts`), so that a server asking every connection to leave is redialled ever
 * more slowly until one lasts `reconnect.resetAfterMs`; and the connection left is closed once
 * its calls are done, or after `connectTimeoutMs` with those calls rejected.
 */
import type { Subscription } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import type { DisconnectEvent } from '../../src/client/authentication.js';
import type { Session } from '../../src/index.js';
import { ConnectionClosedError } from '../../src/protocol/local-errors.js';
import { ReservedMethod } from '../../src/protocol/reserved.js';
import { sumGateway, waitForState } from '../support/client.js';
import { captureLogger, logged } from '../support/logging.js';
import type { LogRecord } from '../support/logging.js';
import { Resources } from '../support/resources.js';
import { waitUntil, within } from '../support/waiting.js';

const res = new Resources();
const subscriptions: Subscription[] = [];
/** Releases the calls a test's server left hanging, so the gateway can close. */
const releases: (() => void)[] = [];
afterEach(async () => {
  for (const s of subscriptions.splice(0)) s.unsubscribe();
  for (const release of releases.splice(0)) release();
  await res.cleanup();
});

/** The delays the client chose, from its debug log. */
const delaysOf = (records: readonly LogRecord[]) =>
  logged(records, 'reconnect scheduled').map((r) => (r.obj as { delayMs: number }).delayMs);

const askToReconnect = (session: Session) => session.notify(ReservedMethod.Reconnect, {});

describe('rpc.reconnect and the backoff', () => {
  it('redials ever more slowly a server that asks every connection to leave at once', async () => {
    const { gateway, url } = await sumGateway(res);
    subscriptions.push(gateway.connected$.subscribe(askToReconnect));
    const { logger, records } = captureLogger();
    const client = res.client(url, {
      logger,
      reconnect: { initialDelayMs: 5, maxDelayMs: 40, factor: 2, jitter: 0, resetAfterMs: 60_000 },
    });
    await waitUntil(() => delaysOf(records).length >= 6, 'six reconnects');
    await client.close();
    // The first move is at once; the ones after it wait as failed attempts do.
    expect(delaysOf(records).slice(0, 6)).toEqual([0, 10, 20, 40, 40, 40]);
  });

  it('moves at once each time the connection left had lasted resetAfterMs', async () => {
    const { gateway, url } = await sumGateway(res);
    const sessions: Session[] = [];
    subscriptions.push(
      gateway.connected$.subscribe((session: Session) => {
        if (sessions.push(session) <= 3) askToReconnect(session);
      }),
    );
    const { logger, records } = captureLogger();
    const client = res.client(url, {
      logger,
      reconnect: { initialDelayMs: 5, maxDelayMs: 40, factor: 2, jitter: 0, resetAfterMs: 0 },
    });
    await waitUntil(() => sessions.length === 4, 'the fourth connection');
    await waitForState(client, 'open');
    expect(await client.call('sum', [1, 2])).toBe(3);
    expect(delaysOf(records)).toEqual([0, 0, 0]);
  });
});

describe('the connection the server asked the client to leave', () => {
  it('is closed after connectTimeoutMs when a call on it stays unanswered; the call rejects', async () => {
    const { gateway, url } = await sumGateway(res);
    const hung: Session[] = [];
    gateway.method('hang', (_params, context) => {
      hung.push(context.session as Session);
      return new Promise((resolve) => releases.push(() => resolve(null)));
    });
    const client = res.client(url, { callTimeoutMs: 0, connectTimeoutMs: 200 });
    const events: DisconnectEvent[] = [];
    subscriptions.push(client.disconnects$.subscribe((e) => events.push(e)));
    await client.opened();
    const hanging = client.call('hang').then(
      () => 'answered',
      (err: unknown) => err,
    );
    await waitUntil(() => hung.length === 1, 'the call on the server');
    askToReconnect(hung[0]!);
    await waitForState(client, 'reconnecting');
    // Made while the connection is being left: it waits for the next one.
    const later = client.call('sum', [2, 3]);
    later.catch(() => undefined); // awaited below; not unhandled should the test fail first

    expect(await within(hanging, 'the unanswered call to fail')).toBeInstanceOf(
      ConnectionClosedError,
    );
    expect(await within(later, 'the call made meanwhile')).toBe(5);
    expect(events[0]).toMatchObject({
      code: 1000,
      reason: 'reconnect deadline: calls unfinished',
      willRetry: true,
    });
  });

  it('is closed as soon as its calls are answered, within connectTimeoutMs', async () => {
    const { gateway, url } = await sumGateway(res);
    const hung: Session[] = [];
    gateway.method('slow', (_params, context) => {
      hung.push(context.session as Session);
      return new Promise((resolve) => releases.push(() => resolve('done')));
    });
    const client = res.client(url, { callTimeoutMs: 0, connectTimeoutMs: 60_000 });
    const events: DisconnectEvent[] = [];
    subscriptions.push(client.disconnects$.subscribe((e) => events.push(e)));
    await client.opened();
    const slow = client.call('slow');
    await waitUntil(() => hung.length === 1, 'the call on the server');
    askToReconnect(hung[0]!);
    await waitForState(client, 'reconnecting');
    releases.shift()!();

    expect(await within(slow, 'the slow call')).toBe('done');
    await within(waitForState(client, 'open'), 'the next connection');
    expect(events[0]).toMatchObject({ code: 1000, reason: 'reconnecting on server request' });
  });
});

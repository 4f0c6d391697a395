/*
 * The TimeoutError of a call that never left the client tells what ended the last connection or
 * attempt at one: a dial that failed ("last attempt: HTTP 404") apart from a connection that had
 * opened and was closed (a server restarting: "last connection closed with 1012 ...").
 */
import type { Subscription } from 'rxjs';
import { afterEach, expect, it } from 'vitest';
import type { ClientOptions } from '../../src/client/client-options.js';
import type { Session } from '../../src/index.js';
import { ReconnectFailedError, TimeoutError } from '../../src/protocol/local-errors.js';
import { sumGateway, waitForState } from '../support/client.js';
import { rejectionOf } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
const subscriptions: Subscription[] = [];
afterEach(async () => {
  for (const s of subscriptions.splice(0)) s.unsubscribe();
  await res.cleanup();
});

it('a call timed out unsent after the server closed the connection says the connection closed, not that a dial failed', async () => {
  const { gateway, url } = await sumGateway(res);
  const sessions: Session[] = [];
  subscriptions.push(gateway.connected$.subscribe((session: Session) => sessions.push(session)));
  // No redial before the call times out: the connection's close stays the last ending.
  const client = res.client(url, {
    reconnect: { initialDelayMs: 60_000, maxDelayMs: 60_000, jitter: 0 },
  });
  await client.opened();
  await waitUntil(() => sessions.length === 1, 'the session');
  sessions[0]!.close(1012, 'server restarting');
  await waitForState(client, 'reconnecting');

  const error = await rejectionOf(client.call('sum', [1, 2], { timeoutMs: 100 }));
  expect(error).toBeInstanceOf(TimeoutError);
  expect(error).toMatchObject({
    sent: false,
    lastFailure: 'connection closed with 1012 "server restarting"',
  });
  expect((error as Error).message).toBe(
    'Call to "sum" timed out after 100 ms, never sent: no connection was open (last connection closed with 1012 "server restarting")',
  );
});

it('a dial whose socket closed unopened, with no error and no status (as in a browser), says it never opened', async () => {
  /** A WebSocket that never opens: it closes 1006 with nothing else told, as a browser's does. */
  class NeverOpens {
    onopen: (() => void) | null = null;
    onclose: ((event: { code: number; reason: string }) => void) | null = null;
    onerror: (() => void) | null = null;
    onmessage = null;
    readyState = 0;
    protocol = '';
    constructor() {
      setTimeout(() => this.onclose?.({ code: 1006, reason: '' }), 0);
    }
    close(): void {}
    send(): void {}
  }
  const client = res.client('ws://127.0.0.1:9/rpc', {
    WebSocket: NeverOpens as unknown as ClientOptions['WebSocket'],
    reconnect: { initialDelayMs: 60_000, maxDelayMs: 60_000, jitter: 0 },
  });
  await waitUntil(() => client.lastDisconnect !== undefined, 'the dial to fail');
  const error = await rejectionOf(client.call('sum', [1, 2], { timeoutMs: 50 }));
  expect(error).toMatchObject({ sent: false, lastFailure: 'closed 1006 before opening' });
  expect((error as Error).message).toMatch(/\(last attempt: closed 1006 before opening\)$/);
});

it('a dial that failed reads as the last attempt; a lost connection as the last connection', () => {
  expect(new TimeoutError('sum', 2_500, false, 'HTTP 404').message).toBe(
    'Call to "sum" timed out after 2500 ms, never sent: no connection was open (last attempt: HTTP 404)',
  );
  expect(new TimeoutError('sum', 2_500, false, 'connection closed with 1006').message).toBe(
    'Call to "sum" timed out after 2500 ms, never sent: no connection was open (last connection closed with 1006)',
  );
  expect(new ReconnectFailedError(3, 'connect ECONNREFUSED 127.0.0.1:9').message).toBe(
    'Reconnect attempts exhausted (reconnect.maxAttempts 3; last attempt: connect ECONNREFUSED 127.0.0.1:9)',
  );
});

/**
 * An unsubscribe refused for a moment waits to be sent again on its connection; when that
 * connection is lost first (which ends the subscription on the server anyway), the wait is let go
 * and counted as done: the unsubscribes of refused joins are bounded by a window, and one never
 * counted as done would keep a place in it for good, so that later joins past `maxJoined` were no
 * longer refused.
 */
import { expect, it } from 'vitest';
import { ClientSubscriptions } from '../../src/client/subscriptions.js';
import type { SubscriptionCaller } from '../../src/client/subscriptions.js';
import { silentLogger } from '../../src/peer/logger.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { JsonRpcError } from '../../src/protocol/errors.js';
import { DEFAULT_SUBSCRIPTION_METHODS } from '../../src/protocol/subscription-frames.js';

it('an unsubscribe waiting to be sent again is let go with its connection, its place in the window given back', async () => {
  let connection: object | undefined = {};
  const unsubscribed: unknown[] = [];
  let refuse = true;
  const caller: SubscriptionCaller = {
    call: () => Promise.resolve(true),
    get connection() {
      return connection;
    },
    callOn: (_connection, method, params) => {
      if (method !== 'unsubscribe') return Promise.resolve(true);
      unsubscribed.push((params as unknown[])[0]);
      if (!refuse) return Promise.resolve(true);
      refuse = false;
      return Promise.reject(new JsonRpcError(ErrorCode.RateLimited, 'Rate limit exceeded'));
    },
    subscribe: () => new Promise(() => undefined),
    // Long past the test: the retry is still waiting when the connection goes.
    retryDelay: () => 60_000,
    get isOpen() {
      return connection !== undefined;
    },
    isClosed: false,
  };
  // maxPendingCalls 2: one unsubscribe of a refused join at a time.
  const subs = new ClientSubscriptions(caller, DEFAULT_SUBSCRIPTION_METHODS, silentLogger, {
    maxJoined: 0,
    maxPendingCalls: 2,
  });
  subs.handleJoined({ topic: 'a', subscription: 'x1' });
  await new Promise((resolve) => setImmediate(resolve));
  expect(unsubscribed).toEqual(['x1']); // refused -32003: waits to be sent again
  subs.connectionLost();
  connection = {};
  subs.connectionOpened();
  subs.handleJoined({ topic: 'b', subscription: 'x2' });
  await new Promise((resolve) => setImmediate(resolve));
  expect(unsubscribed).toEqual(['x1', 'x2']);
  subs.closeAll();
});

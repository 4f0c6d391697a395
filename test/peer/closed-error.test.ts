/**
 * What a call lost with its connection is told: ConnectionClosedError naming the close's code
 * and reason in its message (a heartbeat's 4000, a drain's 1012 read in a console at a glance),
 * and carrying them as fields; a call that timed out before it was ever sent says so.
 */
import { expect, it } from 'vitest';
import { fromWire, toWire } from '../../src/client/shared/wire-errors.js';
import { closedError } from '../../src/peer/peer-options.js';
import {
  ConnectionClosedError,
  NotConnectedError,
  ReconnectFailedError,
  TimeoutError,
} from '../../src/protocol/local-errors.js';
import { JsonRpcError, MethodNotFoundError } from '../../src/protocol/errors.js';

it('ConnectionClosedError says the code and reason the connection closed with', () => {
  const lost = closedError({ code: 4000, reason: 'heartbeat timeout' });
  expect(lost).toBeInstanceOf(ConnectionClosedError);
  expect(lost.message).toBe('Connection closed (4000 heartbeat timeout)');
  expect([lost.closeCode, lost.closeReason]).toEqual([4000, 'heartbeat timeout']);
  expect(closedError({ code: 1006, reason: '' }).message).toBe('Connection closed (1006)');
  expect(closedError(undefined).message).toBe('Connection closed');
});

it('a TimeoutError of a call never sent says so; one sent does not', () => {
  expect(new TimeoutError('sum', 2_500, false).message).toBe(
    'Call to "sum" timed out after 2500 ms, never sent: no connection was open',
  );
  expect(new TimeoutError('sum', 2_500).message).toBe('Call to "sum" timed out after 2500 ms');
});

it("a shared connection's tab gets the same errors: close and unsent timeout cross the worker", () => {
  const unsent = fromWire(toWire(new TimeoutError('sum', 2_500, false)));
  expect(unsent).toBeInstanceOf(TimeoutError);
  expect(unsent.message).toBe(
    'Call to "sum" timed out after 2500 ms, never sent: no connection was open',
  );
  const lost = fromWire(toWire(closedError({ code: 4000, reason: 'heartbeat timeout' })));
  expect(lost.message).toBe('Connection closed (4000 heartbeat timeout)');
});

it('the last attempt’s failure and an answer’s method cross the worker too', () => {
  const unsent = fromWire(toWire(new TimeoutError('sum', 2_500, false, 'HTTP 404')));
  expect(unsent.message).toBe(
    'Call to "sum" timed out after 2500 ms, never sent: no connection was open (last attempt: HTTP 404)',
  );
  const answer = JsonRpcError.fromErrorObject({ code: -32601, message: 'Method not found' });
  answer.method = 'sum2';
  const crossed = fromWire(toWire(answer));
  expect(crossed).toBeInstanceOf(MethodNotFoundError);
  expect(crossed).toMatchObject({ code: -32601, message: 'Method not found', method: 'sum2' });
});

it('ReconnectFailedError crosses the worker as itself, a NotConnectedError with its fields', () => {
  const gaveUp = new ReconnectFailedError(3, 'connection closed with 1013 "try again later"');
  const crossed = fromWire(toWire(gaveUp));
  expect(crossed).toBeInstanceOf(ReconnectFailedError);
  expect(crossed).toBeInstanceOf(NotConnectedError);
  expect(crossed).toMatchObject({
    attempts: 3,
    lastFailure: 'connection closed with 1013 "try again later"',
    message: gaveUp.message,
  });
});

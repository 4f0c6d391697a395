/*
 * The default message of every error code, pinned one by one: error-codes.ts writes them as one
 * text in the order of ErrorCode (smaller in the browser bundle), so a code added or moved
 * without its message shows here.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, defaultErrorMessage } from '../../src/protocol/error-codes.js';

describe('defaultErrorMessage', () => {
  it('gives each code its message', () => {
    expect(defaultErrorMessage).toEqual({
      [-32700]: 'Parse error',
      [-32600]: 'Invalid Request',
      [-32601]: 'Method not found',
      [-32602]: 'Invalid params',
      [-32603]: 'Internal error',
      [-32000]: 'Server busy',
      [-32001]: 'Request cancelled',
      [-32002]: 'Batch too large',
      [-32003]: 'Rate limit exceeded',
      [-32004]: 'Unauthorized',
      [-32005]: 'Too many subscriptions',
      [-32006]: 'Server shutting down',
      [-32007]: 'Message nested too deeply',
      [-32008]: 'Not supported on this transport',
      [-32009]: 'Broker unavailable',
      [-32010]: 'Unauthenticated',
      [-32011]: 'Upstream unavailable',
      [-32012]: 'Upstream timeout',
      [-32013]: 'Upstream busy',
    });
  });

  it('has a message for every code and for nothing else, in the order of ErrorCode', () => {
    expect(Object.keys(defaultErrorMessage)).toEqual(Object.values(ErrorCode).map(String));
  });
});

/**
 * Error codes on the wire are integers (spec 5.1): a JsonRpcError with any other code is sent
 * as -32603 Internal error, and ServerError refuses codes outside -32000..-32099.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  ErrorCode,
  JsonRpcError,
  SERVER_ERROR_MAX,
  SERVER_ERROR_MIN,
  ServerError,
  toWireError,
} from '../../src/protocol/index.js';
import { Resources } from '../support/resources.js';
import { RawRpc } from '../support/raw-rpc.js';

const INTERNAL = { code: ErrorCode.InternalError, message: 'Internal error' };

describe('toWireError', () => {
  it.each([NaN, 1.5, Infinity, -Infinity, 2 ** 60])(
    'a JsonRpcError with code %s becomes -32603, without its message or data',
    (code) => {
      const err = new JsonRpcError(code, 'custom', { secret: 1 });
      expect(toWireError(err)).toEqual(INTERNAL);
      expect(JSON.parse(JSON.stringify(toWireError(err)))).toEqual(INTERNAL);
    },
  );

  it('with exposeInternals, the replaced error is in data, as for any internal failure', () => {
    const wire = toWireError(new JsonRpcError(NaN, 'custom'), true);
    expect(wire).toMatchObject({
      ...INTERNAL,
      data: { name: 'JsonRpcError', message: 'custom' },
    });
  });

  it('integer codes go through unchanged, in or out of the reserved ranges', () => {
    expect(toWireError(new JsonRpcError(42, 'answer', [1]))).toEqual({
      code: 42,
      message: 'answer',
      data: [1],
    });
    expect(toWireError(new JsonRpcError(-32601))).toEqual({
      code: -32601,
      message: 'Method not found',
    });
  });
});

describe('ServerError', () => {
  it('takes every integer code from -32099 to -32000', () => {
    expect(new ServerError(SERVER_ERROR_MIN).code).toBe(-32099);
    expect(new ServerError(SERVER_ERROR_MAX).code).toBe(-32000);
    expect(new ServerError(-32050, 'm', 1).toErrorObject()).toEqual({
      code: -32050,
      message: 'm',
      data: 1,
    });
  });

  it.each([-32100, -31999, -32603, 0, 42, -32050.5, NaN])(
    'throws a RangeError for code %s',
    (code) => {
      expect(() => new ServerError(code)).toThrow(RangeError);
    },
  );
});

describe('over a real socket', () => {
  const res = new Resources();
  afterEach(() => res.cleanup());

  it('a handler throwing JsonRpcError(NaN) or (1.5) answers -32603, never a null or fractional code', async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('nan', () => {
      throw new JsonRpcError(NaN, 'bad code');
    });
    gateway.method('fraction', async () => {
      await Promise.resolve();
      throw new JsonRpcError(1.5, 'bad code');
    });
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    expect((await raw.request('nan')).error).toEqual(INTERNAL);
    expect((await raw.request('fraction')).error).toEqual(INTERNAL);
  });
});

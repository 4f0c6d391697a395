import { describe, it, expect } from 'vitest';
import {
  encodeBatch,
  encodeFailure,
  encodeId,
  encodeNotification,
  encodeRequest,
  encodeSuccess,
} from '../../src/protocol/encode.js';
import {
  ErrorCode,
  SERVER_ERROR_MAX,
  SERVER_ERROR_MIN,
  defaultErrorMessage,
} from '../../src/protocol/error-codes.js';
import {
  InternalError,
  InvalidParamsError,
  InvalidRequestError,
  JsonRpcError,
  MethodNotFoundError,
  ParseError,
  ServerError,
  toWireError,
} from '../../src/protocol/errors.js';
import {
  CancelledError,
  ConnectionClosedError,
  NotConnectedError,
  RpcLocalError,
  TimeoutError,
  TooManyPendingCallsError,
} from '../../src/protocol/local-errors.js';
import { RESERVED_PREFIX, ReservedMethod, isReservedMethod } from '../../src/protocol/reserved.js';
import { createRawPeer } from '../support/peers.js';

/** Parse one frame of wire text. */
const json = (text: string): unknown => JSON.parse(text);

function parse(text: string): Record<string, unknown> {
  return JSON.parse(text) as Record<string, unknown>;
}

function cyclic(): unknown {
  const a: Record<string, unknown> = { name: 'a' };
  a['self'] = a;
  return a;
}

describe('encodeSuccess', () => {
  it.each<[string, unknown]>([
    ['a number', 19],
    ['a string', 'x"y\\z'],
    ['null', null],
    ['false', false],
    ['an array', ['hello', 5]],
    ['an object', { a: { b: [1, null] } }],
  ])('encodes %s result in the 2.0 shape', (_label, result) => {
    const reply = parse(encodeSuccess(1, result));
    expect(reply).toEqual({ jsonrpc: '2.0', result, id: 1 });
    expect(Object.keys(reply).sort()).toEqual(['id', 'jsonrpc', 'result']);
  });

  it.each<[string, unknown]>([
    ['a string id', 'abc'],
    ['an id with quotes', 'a"b'],
    ['a numeric id', 42],
    ['a fractional id', 1.5],
    ['a negative id', -7],
    ['a null id', null],
  ])('echoes %s exactly', (_label, id) => {
    expect(parse(encodeSuccess(id as string | number | null, 1)).id).toEqual(id);
  });

  it('sends an undefined result as null (result is REQUIRED)', () => {
    const reply = parse(encodeSuccess(1, undefined));
    expect('result' in reply).toBe(true);
    expect(reply.result).toBeNull();
    expect('error' in reply).toBe(false);
  });

  it('sends a function or symbol result as null', () => {
    expect(parse(encodeSuccess(1, () => 1)).result).toBeNull();
    expect(parse(encodeSuccess(1, Symbol('s'))).result).toBeNull();
  });

  it.each<[string, () => unknown]>([
    ['BigInt', () => 10n],
    ['a BigInt nested in an object', () => ({ n: [1n] })],
    ['a cycle', cyclic],
    [
      'a toJSON that throws',
      () => ({
        toJSON() {
          throw new Error('nope');
        },
      }),
    ],
  ])('turns a result holding %s into a -32603 error reply without throwing', (_label, make) => {
    let text = '';
    expect(() => {
      text = encodeSuccess('q', make());
    }).not.toThrow();
    const reply = parse(text);
    expect(reply.jsonrpc).toBe('2.0');
    expect(reply.id).toBe('q');
    expect('result' in reply).toBe(false);
    expect(reply.error).toMatchObject({ code: -32603, message: 'Internal error' });
  });

  it('encodes the 1.0 shape: result, error null, id', () => {
    const reply = parse(encodeSuccess(3, [1], '1.0'));
    expect(reply).toEqual({ result: [1], error: null, id: 3 });
    expect('jsonrpc' in reply).toBe(false);
  });

  it('turns a non-serializable 1.0 result into a 1.0 error reply', () => {
    const reply = parse(encodeSuccess(3, 1n, '1.0'));
    expect(reply.result).toBeNull();
    expect(reply.error).toMatchObject({ code: -32603 });
    expect(reply.id).toBe(3);
    expect('jsonrpc' in reply).toBe(false);
  });
});

describe('encodeFailure', () => {
  it('encodes the 2.0 shape with error and no result', () => {
    const reply = parse(encodeFailure('1', { code: -32601, message: 'Method not found' }));
    expect(reply).toEqual({
      jsonrpc: '2.0',
      error: { code: -32601, message: 'Method not found' },
      id: '1',
    });
    expect('result' in reply).toBe(false);
  });

  it('keeps error data', () => {
    const reply = parse(encodeFailure(null, { code: -32000, message: 'x', data: { a: [1] } }));
    expect(reply.error).toEqual({ code: -32000, message: 'x', data: { a: [1] } });
    expect(reply.id).toBeNull();
  });

  it('drops data that cannot be serialized instead of throwing', () => {
    for (const data of [5n, cyclic()]) {
      let text = '';
      expect(() => {
        text = encodeFailure(2, { code: -32000, message: 'boom', data });
      }).not.toThrow();
      expect(parse(text)).toEqual({
        jsonrpc: '2.0',
        error: { code: -32000, message: 'boom' },
        id: 2,
      });
    }
  });

  it('encodes the 1.0 shape: result null, error, id', () => {
    expect(parse(encodeFailure(5, { code: 1, message: 'bad' }, '1.0'))).toEqual({
      result: null,
      error: { code: 1, message: 'bad' },
      id: 5,
    });
  });
});

describe('encodeRequest, encodeNotification, encodeBatch, encodeId', () => {
  it('encodes a request with and without params', () => {
    expect(parse(encodeRequest(1, 'sum', [1, 2]))).toEqual({
      jsonrpc: '2.0',
      method: 'sum',
      params: [1, 2],
      id: 1,
    });
    const bare = parse(encodeRequest('a', 'ping'));
    expect(bare).toEqual({ jsonrpc: '2.0', method: 'ping', id: 'a' });
    expect('params' in bare).toBe(false);
  });

  it('throws when request params cannot be serialized (caller bug)', () => {
    expect(() => encodeRequest(1, 'm', { n: 1n })).toThrow(TypeError);
  });

  it('encodes a notification without an id member', () => {
    const n = parse(encodeNotification('update', { a: 1 }));
    expect(n).toEqual({ jsonrpc: '2.0', method: 'update', params: { a: 1 } });
    expect('id' in n).toBe(false);
    expect(parse(encodeNotification('bare'))).toEqual({ jsonrpc: '2.0', method: 'bare' });
  });

  it('escapes method names', () => {
    expect(parse(encodeRequest(1, 'a"b\\c\n')).method).toBe('a"b\\c\n');
  });

  it('joins parts into a JSON array', () => {
    const parts = [encodeSuccess(1, 1), encodeFailure(2, { code: 1, message: 'x' })];
    expect(JSON.parse(encodeBatch(parts))).toEqual(parts.map(json));
  });

  it('encodes ids as JSON', () => {
    expect(encodeId('a"b')).toBe('"a\\"b"');
    expect(encodeId(12)).toBe('12');
    expect(encodeId(null)).toBe('null');
    expect(JSON.parse(encodeId(1e21))).toBe(1e21);
  });
});

describe('JsonRpcError and subclasses', () => {
  it.each<[string, new (message?: string, data?: unknown) => JsonRpcError, number, string]>([
    ['ParseError', ParseError, -32700, 'Parse error'],
    ['InvalidRequestError', InvalidRequestError, -32600, 'Invalid Request'],
    ['MethodNotFoundError', MethodNotFoundError, -32601, 'Method not found'],
    ['InvalidParamsError', InvalidParamsError, -32602, 'Invalid params'],
    ['InternalError', InternalError, -32603, 'Internal error'],
  ])('%s carries its code, default message and data', (name, Cls, code, message) => {
    const plain = new Cls();
    expect(plain).toBeInstanceOf(JsonRpcError);
    expect(plain).toBeInstanceOf(Error);
    expect(plain.name).toBe(name);
    expect(plain.code).toBe(code);
    expect(plain.message).toBe(message);
    expect(plain.data).toBeUndefined();
    expect(plain.toErrorObject()).toEqual({ code, message });
    expect('data' in plain.toErrorObject()).toBe(false);

    const custom = new Cls('custom', { field: 'x' });
    expect(custom.message).toBe('custom');
    expect(custom.data).toEqual({ field: 'x' });
    expect(custom.toErrorObject()).toEqual({ code, message: 'custom', data: { field: 'x' } });
  });

  it('JsonRpcError takes any code, with a default message for known codes', () => {
    expect(new JsonRpcError(-32601).message).toBe('Method not found');
    expect(new JsonRpcError(ErrorCode.RateLimited).message).toBe('Rate limit exceeded');
    expect(new JsonRpcError(42).message).toBe('Server error');
    const e = new JsonRpcError(42, 'answer', null);
    expect(e.name).toBe('JsonRpcError');
    expect(e.toErrorObject()).toEqual({ code: 42, message: 'answer', data: null });
  });

  it('ServerError takes a code in the implementation range', () => {
    const e = new ServerError(-32050, 'custom server error', [1]);
    expect(e).toBeInstanceOf(JsonRpcError);
    expect(e.name).toBe('ServerError');
    expect(e.toErrorObject()).toEqual({ code: -32050, message: 'custom server error', data: [1] });
  });

  it('fromErrorObject rebuilds known subclasses', () => {
    const cases: [number, new (message?: string, data?: unknown) => JsonRpcError][] = [
      [-32700, ParseError],
      [-32600, InvalidRequestError],
      [-32601, MethodNotFoundError],
      [-32602, InvalidParamsError],
      [-32603, InternalError],
    ];
    for (const [code, Cls] of cases) {
      const e = JsonRpcError.fromErrorObject({ code, message: 'remote says', data: { d: 1 } });
      expect(e).toBeInstanceOf(Cls);
      expect(e.code).toBe(code);
      expect(e.message).toBe('remote says');
      expect(e.data).toEqual({ d: 1 });
    }
  });

  it('fromErrorObject keeps unknown codes as a plain JsonRpcError', () => {
    const e = JsonRpcError.fromErrorObject({ code: -32004, message: 'Unauthorized' });
    expect(e.constructor).toBe(JsonRpcError);
    expect(e.code).toBe(-32004);
    expect(e.message).toBe('Unauthorized');
    expect(e.data).toBeUndefined();
  });

  it('fromErrorObject round-trips through toErrorObject', () => {
    const obj = { code: -32602, message: 'bad a', data: ['a'] };
    expect(JsonRpcError.fromErrorObject(obj).toErrorObject()).toEqual(obj);
  });
});

describe('toWireError', () => {
  it('passes a JsonRpcError through as its error object', () => {
    expect(toWireError(new InvalidParamsError('need a', { missing: 'a' }))).toEqual({
      code: -32602,
      message: 'need a',
      data: { missing: 'a' },
    });
  });

  it('hides the message and stack of any other error', () => {
    const err = new TypeError('secret path /etc/passwd');
    const wire = toWireError(err);
    expect(wire).toEqual({ code: -32603, message: 'Internal error' });
    expect(JSON.stringify(wire)).not.toContain('secret');
  });

  it('hides thrown non-errors too', () => {
    expect(toWireError('secret string')).toEqual({ code: -32603, message: 'Internal error' });
    expect(toWireError(undefined)).toEqual({ code: -32603, message: 'Internal error' });
  });

  it('puts name, message and stack in data when exposeInternals is set', () => {
    const err = new TypeError('secret');
    const wire = toWireError(err, true);
    expect(wire.code).toBe(-32603);
    expect(wire.message).toBe('Internal error');
    expect(wire.data).toEqual({ name: 'TypeError', message: 'secret', stack: err.stack });
    expect(toWireError('plain', true).data).toEqual({ message: 'plain' });
  });

  it('the Peer hides handler internals by default and shows them on request', async () => {
    const register = (raw: ReturnType<typeof createRawPeer>) =>
      raw.peer.registry.method('fail', () => {
        throw new Error('db password is hunter2');
      });
    const hidden = createRawPeer();
    register(hidden);
    const [h] = await hidden.send('{"jsonrpc":"2.0","method":"fail","id":1}');
    expect(JSON.parse(h!)).toEqual({
      jsonrpc: '2.0',
      error: { code: -32603, message: 'Internal error' },
      id: 1,
    });
    expect(h).not.toContain('hunter2');

    const shown = createRawPeer({ exposeErrorDetails: true });
    register(shown);
    const [s] = await shown.send('{"jsonrpc":"2.0","method":"fail","id":1}');
    expect(JSON.parse(s!).error.data.message).toBe('db password is hunter2');
  });
});

describe('Peer replies for non-serializable results', () => {
  it.each<[string, () => unknown]>([
    ['BigInt', () => 1n],
    ['a cycle', cyclic],
  ])('answers a handler returning %s with -32603', async (_label, make) => {
    const raw = createRawPeer();
    raw.peer.registry.method('bad', () => make());
    raw.peer.registry.method('badAsync', () => Promise.resolve(make()));
    for (const method of ['bad', 'badAsync']) {
      const frames = await raw.send(`{"jsonrpc":"2.0","method":"${method}","id":"x"}`);
      expect(frames).toHaveLength(1);
      const reply = JSON.parse(frames[0]!);
      expect(reply.error.code).toBe(-32603);
      expect(reply.id).toBe('x');
      expect('result' in reply).toBe(false);
    }
  });

  it('answers a handler returning undefined with result null', async () => {
    const raw = createRawPeer();
    raw.peer.registry.method('nothing', () => undefined);
    const frames = await raw.send('{"jsonrpc":"2.0","method":"nothing","id":1}');
    expect(frames.map(json)).toEqual([{ jsonrpc: '2.0', result: null, id: 1 }]);
  });

  it('answers a 1.0 request in the 1.0 shape', async () => {
    const raw = createRawPeer({ parse: { acceptV1: true } });
    raw.peer.registry.method('echo', (p) => p);
    const ok = await raw.send('{"method":"echo","params":[1],"id":7}');
    expect(ok.map(json)).toEqual([{ result: [1], error: null, id: 7 }]);
    const missing = await raw.send('{"method":"nope","params":[],"id":8}');
    expect(missing.map(json)).toEqual([
      { result: null, error: { code: -32601, message: 'Method not found' }, id: 8 },
    ]);
    expect(await raw.send('{"method":"echo","params":[1],"id":null}')).toEqual([]);
  });
});

describe('error codes', () => {
  it('has the specification codes', () => {
    expect(ErrorCode.ParseError).toBe(-32700);
    expect(ErrorCode.InvalidRequest).toBe(-32600);
    expect(ErrorCode.MethodNotFound).toBe(-32601);
    expect(ErrorCode.InvalidParams).toBe(-32602);
    expect(ErrorCode.InternalError).toBe(-32603);
  });

  it('keeps implementation codes in the reserved server-error range, all distinct', () => {
    const spec = new Set([-32700, -32600, -32601, -32602, -32603]);
    const codes = Object.values(ErrorCode);
    expect(new Set(codes).size).toBe(codes.length);
    for (const code of codes) {
      expect(Number.isInteger(code)).toBe(true);
      if (!spec.has(code)) {
        expect(code).toBeGreaterThanOrEqual(SERVER_ERROR_MIN);
        expect(code).toBeLessThanOrEqual(SERVER_ERROR_MAX);
      }
      expect(typeof defaultErrorMessage[code]).toBe('string');
    }
  });
});

describe('local errors', () => {
  it('are RpcLocalErrors, not JsonRpcErrors, with descriptive fields', () => {
    const closed = new ConnectionClosedError(undefined, 1006, 'gone');
    expect(closed.message).toBe('Connection closed');
    expect(closed.closeCode).toBe(1006);
    expect(closed.closeReason).toBe('gone');
    const timeout = new TimeoutError('slow', 250);
    expect(timeout.message).toContain('slow');
    expect(timeout.message).toContain('250');
    expect(timeout.timeoutMs).toBe(250);
    const cancelled = new CancelledError('m', 'why');
    expect(cancelled.method).toBe('m');
    expect(cancelled.reason).toBe('why');
    const full = new TooManyPendingCallsError(8);
    expect(full.limit).toBe(8);
    const nc = new NotConnectedError('offline');
    for (const e of [closed, timeout, cancelled, full, nc]) {
      expect(e).toBeInstanceOf(RpcLocalError);
      expect(e).toBeInstanceOf(Error);
      expect(e).not.toBeInstanceOf(JsonRpcError);
    }
    expect([closed, timeout, cancelled, full, nc].map((e) => e.name)).toEqual([
      'ConnectionClosedError',
      'TimeoutError',
      'CancelledError',
      'TooManyPendingCallsError',
      'NotConnectedError',
    ]);
  });
});

describe('reserved method names', () => {
  it('recognizes the rpc. prefix only at the start', () => {
    expect(RESERVED_PREFIX).toBe('rpc.');
    expect(isReservedMethod(ReservedMethod.Ping)).toBe(true);
    expect(isReservedMethod('rpc.anything')).toBe(true);
    expect(isReservedMethod('rpc')).toBe(false);
    expect(isReservedMethod('xrpc.ping')).toBe(false);
    expect(isReservedMethod('RPC.ping')).toBe(false);
  });

  it('the Peer answers unknown rpc. requests with -32601 and rpc.ping with pong', async () => {
    const raw = createRawPeer();
    const frames = await raw.send(
      '[{"jsonrpc":"2.0","method":"rpc.nope","id":1},{"jsonrpc":"2.0","method":"rpc.ping","id":2}]',
    );
    expect(frames.map(json)).toEqual([
      [
        { jsonrpc: '2.0', error: { code: -32601, message: 'Method not found' }, id: 1 },
        { jsonrpc: '2.0', result: 'pong', id: 2 },
      ],
    ]);
  });
});

import { describe, it, expect } from 'vitest';
import {
  classifyMessage,
  classifyValue,
  isRequestId,
  parseFrame,
} from '../../src/protocol/classify.js';
import type { Incoming } from '../../src/protocol/classify.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';

function one(text: string, options = {}): Incoming {
  const frame = parseFrame(text, options);
  expect(frame.batch).toBe(false);
  expect(frame.messages).toHaveLength(1);
  return frame.messages[0]!;
}

/** The error code of an 'invalid' message; fails the test for any other kind. */
function codeOf(msg: Incoming): number {
  if (msg.kind !== 'invalid') throw new Error(`expected an invalid message, got ${msg.kind}`);
  return msg.error.code;
}

const invalidRequest = (id: unknown, version = '2.0') => ({
  kind: 'invalid',
  version,
  id,
  error: { code: -32600, message: 'Invalid Request' },
});

describe('parseFrame: requests and notifications', () => {
  it.each([
    ['string', '"abc"', 'abc'],
    ['empty string', '""', ''],
    ['integer', '7', 7],
    ['zero', '0', 0],
    ['negative', '-3', -3],
    ['fractional number', '1.5', 1.5],
    ['exponent number', '1e3', 1000],
  ])('accepts a %s id', (_label, idText, id) => {
    expect(one(`{"jsonrpc":"2.0","method":"m","params":[1],"id":${idText}}`)).toEqual({
      kind: 'request',
      version: '2.0',
      id,
      // The text as sent, when String(id) would write the number otherwise (1e3 as 1000).
      ...(String(id) === idText || typeof id === 'string' ? {} : { idText }),
      method: 'm',
      params: [1],
    });
  });

  it('treats a null id as a request, not a notification', () => {
    expect(one('{"jsonrpc":"2.0","method":"m","id":null}')).toEqual({
      kind: 'request',
      version: '2.0',
      id: null,
      method: 'm',
      params: undefined,
    });
  });

  it('treats a missing id as a notification', () => {
    expect(one('{"jsonrpc":"2.0","method":"m","params":{"a":1}}')).toEqual({
      kind: 'notification',
      version: '2.0',
      method: 'm',
      params: { a: 1 },
    });
  });

  it('accepts array and object params, and omitted params', () => {
    expect(one('{"jsonrpc":"2.0","method":"m","params":[],"id":1}')).toMatchObject({
      kind: 'request',
      params: [],
    });
    expect(one('{"jsonrpc":"2.0","method":"m","params":{},"id":1}')).toMatchObject({
      kind: 'request',
      params: {},
    });
    const omitted = one('{"jsonrpc":"2.0","method":"m","id":1}');
    expect(omitted.kind).toBe('request');
    expect((omitted as { params: unknown }).params).toBeUndefined();
  });

  it('accepts method names of any string, including the empty string', () => {
    expect(one('{"jsonrpc":"2.0","method":"","id":1}')).toMatchObject({
      kind: 'request',
      method: '',
    });
  });

  it.each([
    ['object', '{"a":1}'],
    ['array', '[1]'],
    ['boolean true', 'true'],
    ['boolean false', 'false'],
  ])('rejects an %s id with -32600 and id null', (_label, idText) => {
    expect(one(`{"jsonrpc":"2.0","method":"m","id":${idText}}`)).toEqual(invalidRequest(null));
  });

  it('accepts an id too large for a double (any JSON number is an id), keeping its text', () => {
    // JSON.parse reads 1e400 as Infinity; the reply is written with the text as sent.
    expect(one('{"jsonrpc":"2.0","method":"m","id":1e400}')).toEqual({
      kind: 'request',
      version: '2.0',
      id: Infinity,
      idText: '1e400',
      method: 'm',
      params: undefined,
    });
  });

  it.each([
    ['string', '"bar"'],
    ['number', '3'],
    ['boolean', 'true'],
    ['null', 'null'],
  ])('rejects %s params with -32600, keeping a valid id', (_label, paramsText) => {
    expect(one(`{"jsonrpc":"2.0","method":"m","params":${paramsText},"id":9}`)).toEqual(
      invalidRequest(9),
    );
    // Also as a notification: the error has no id to carry.
    expect(one(`{"jsonrpc":"2.0","method":"m","params":${paramsText}}`)).toEqual(
      invalidRequest(null),
    );
  });

  it.each([
    ['number', '1'],
    ['null', 'null'],
    ['array', '["m"]'],
    ['object', '{}'],
  ])('rejects a %s method with -32600, keeping a valid id', (_label, methodText) => {
    expect(one(`{"jsonrpc":"2.0","method":${methodText},"id":"x"}`)).toEqual(invalidRequest('x'));
  });

  it.each([
    ['missing', '{"method":"m","id":1}'],
    ['"1.0"', '{"jsonrpc":"1.0","method":"m","id":1}'],
    ['number 2', '{"jsonrpc":2,"method":"m","id":1}'],
    ['number 2.0', '{"jsonrpc":2.0,"method":"m","id":1}'],
    ['null', '{"jsonrpc":null,"method":"m","id":1}'],
    ['"2.0 "', '{"jsonrpc":"2.0 ","method":"m","id":1}'],
  ])('rejects a %s jsonrpc member with -32600', (_label, text) => {
    expect(one(text)).toEqual(invalidRequest(1));
  });

  it('rejects an object with neither method nor result/error', () => {
    expect(one('{"jsonrpc":"2.0","id":4}')).toEqual(invalidRequest(4));
    expect(one('{"foo":"boo"}')).toEqual(invalidRequest(null));
  });

  it.each(['1', '"x"', 'null', 'true'])('rejects the non-object message %s', (text) => {
    expect(one(text)).toEqual(invalidRequest(null));
  });

  it('answers invalid JSON with -32700 and id null', () => {
    for (const text of ['', ' ', '{', '{"jsonrpc":"2.0",}', 'undefined', "{'a':1}", '[1,]']) {
      expect(one(text)).toEqual({
        kind: 'invalid',
        version: '2.0',
        id: null,
        error: { code: -32700, message: 'Parse error' },
      });
    }
  });
});

describe('parseFrame: responses', () => {
  it('classifies a success response', () => {
    expect(one('{"jsonrpc":"2.0","result":{"a":[1]},"id":"q"}')).toEqual({
      kind: 'success',
      version: '2.0',
      id: 'q',
      result: { a: [1] },
    });
  });

  it('classifies a null result as a success', () => {
    expect(one('{"jsonrpc":"2.0","result":null,"id":1}')).toEqual({
      kind: 'success',
      version: '2.0',
      id: 1,
      result: null,
    });
  });

  it('classifies a failure response', () => {
    expect(
      one('{"jsonrpc":"2.0","error":{"code":-32601,"message":"nope","data":[1]},"id":2}'),
    ).toEqual({
      kind: 'failure',
      version: '2.0',
      id: 2,
      error: { code: -32601, message: 'nope', data: [1] },
    });
  });

  it('classifies a failure response with id null', () => {
    expect(
      one('{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}'),
    ).toMatchObject({ kind: 'failure', id: null });
  });

  it.each([
    ['a string error', '"boom"'],
    ['a null error', 'null'],
    ['an array error', '[1]'],
    ['a non-integer code', '{"code":1.5,"message":"x"}'],
    ['a string code', '{"code":"-32000","message":"x"}'],
    ['a missing message', '{"code":-32000}'],
    ['a non-string message', '{"code":-32000,"message":7}'],
  ])('drops a response with %s as bad-response', (_label, errorText) => {
    expect(one(`{"jsonrpc":"2.0","error":${errorText},"id":1}`).kind).toBe('bad-response');
  });

  it('drops a response carrying both result and error', () => {
    const msg = one('{"jsonrpc":"2.0","result":1,"error":{"code":1,"message":"x"},"id":1}');
    expect(msg.kind).toBe('bad-response');
    expect((msg as { reason: string }).reason).toMatch(/both/);
  });

  it('drops a response without an id or with an invalid id', () => {
    expect(one('{"jsonrpc":"2.0","result":1}').kind).toBe('bad-response');
    expect(one('{"jsonrpc":"2.0","result":1,"id":{}}').kind).toBe('bad-response');
    expect(one('{"jsonrpc":"2.0","result":1,"id":true}').kind).toBe('bad-response');
  });

  it('drops a response with a missing or wrong jsonrpc member', () => {
    expect(one('{"result":1,"id":1}').kind).toBe('bad-response');
    expect(one('{"jsonrpc":"1.0","result":1,"id":1}').kind).toBe('bad-response');
    expect(one('{"error":{"code":1,"message":"x"},"id":1}').kind).toBe('bad-response');
  });

  it('keeps the raw value of a bad response', () => {
    const msg = one('{"jsonrpc":"2.0","result":1,"error":{"code":1,"message":"x"},"id":1}');
    expect((msg as { raw: unknown }).raw).toEqual({
      jsonrpc: '2.0',
      result: 1,
      error: { code: 1, message: 'x' },
      id: 1,
    });
  });
});

describe('parseFrame: batches', () => {
  it('classifies each member of a batch in order', () => {
    const frame = parseFrame(
      '[{"jsonrpc":"2.0","method":"a","id":1},{"jsonrpc":"2.0","method":"b"},2,{"jsonrpc":"2.0","result":3,"id":5}]',
    );
    expect(frame.batch).toBe(true);
    expect(frame.messages.map((m) => m.kind)).toEqual([
      'request',
      'notification',
      'invalid',
      'success',
    ]);
  });

  it('answers the empty array with a single -32600 (not a batch)', () => {
    expect(one('[]')).toEqual(invalidRequest(null));
  });

  it('treats a one-member array as a batch', () => {
    const frame = parseFrame('[{"jsonrpc":"2.0","method":"a","id":1}]');
    expect(frame.batch).toBe(true);
    expect(frame.messages).toHaveLength(1);
  });

  it('treats a nested array member as an invalid request', () => {
    const frame = parseFrame('[[{"jsonrpc":"2.0","method":"a","id":1}]]');
    expect(frame.batch).toBe(true);
    expect(frame.messages).toEqual([invalidRequest(null)]);
  });

  it('answers a batch over maxBatch with a single -32002 error', () => {
    const member = '{"jsonrpc":"2.0","method":"a","id":1}';
    const text = `[${Array(4).fill(member).join(',')}]`;
    expect(one(text, { maxBatch: 3 })).toEqual({
      kind: 'invalid',
      version: '2.0',
      id: null,
      error: {
        code: ErrorCode.BatchTooLarge,
        message: 'Batch too large',
        data: { maxBatch: 3, received: 4 },
      },
    });
    expect(ErrorCode.BatchTooLarge).toBe(-32002);
  });

  it('accepts a batch of exactly maxBatch members', () => {
    const member = '{"jsonrpc":"2.0","method":"a","id":1}';
    const frame = parseFrame(`[${Array(3).fill(member).join(',')}]`, { maxBatch: 3 });
    expect(frame.batch).toBe(true);
    expect(frame.messages).toHaveLength(3);
    expect(frame.messages.every((m) => m.kind === 'request')).toBe(true);
  });

  it('classifyValue agrees with parseFrame', () => {
    const value = [{ jsonrpc: '2.0', method: 'a', id: 1 }, 5];
    expect(classifyValue(value)).toEqual(parseFrame(JSON.stringify(value)));
  });
});

describe('parseFrame: maxDepth', () => {
  it('answers JSON deeper than maxDepth with -32600 Invalid Request, data.maxDepth, id null', () => {
    // Valid JSON that this server does not take as a Request: the specification's -32600
    // (not a code of our own); the depth is measured before parsing, so the id is never read.
    const text = '{"jsonrpc":"2.0","method":"m","params":[[[[1]]]],"id":5}';
    expect(one(text, { maxDepth: 4 })).toEqual({
      kind: 'invalid',
      version: '2.0',
      id: null,
      error: {
        code: ErrorCode.InvalidRequest,
        message: 'Invalid Request',
        data: { maxDepth: 4 },
      },
    });
  });

  it('accepts JSON exactly at maxDepth', () => {
    const text = '{"jsonrpc":"2.0","method":"m","params":[[[[1]]]],"id":5}';
    expect(one(text, { maxDepth: 5 })).toMatchObject({ kind: 'request', id: 5 });
  });

  it('does not count brackets inside strings', () => {
    const text = '{"jsonrpc":"2.0","method":"[[[[[[[[","params":["{{{{{{{{"],"id":"]]]]"}';
    expect(one(text, { maxDepth: 2 })).toMatchObject({
      kind: 'request',
      method: '[[[[[[[[',
      id: ']]]]',
    });
  });

  it('does not throw on 100000 unclosed brackets, with or without a limit', () => {
    const text = '['.repeat(100_000);
    expect(codeOf(one(text))).toBe(ErrorCode.ParseError);
    // Too deep is seen before (and instead of) parsing: not also telling invalid JSON apart.
    expect(codeOf(one(text, { maxDepth: 64 }))).toBe(ErrorCode.InvalidRequest);
  });

  it('does not throw on 100000 balanced brackets', () => {
    const text = '['.repeat(100_000) + ']'.repeat(100_000);
    const frame = parseFrame(text);
    expect(frame.batch).toBe(true);
    expect(frame.messages).toEqual([invalidRequest(null)]);
    expect(codeOf(one(text, { maxDepth: 64 }))).toBe(ErrorCode.InvalidRequest);
  });
});

describe('parseFrame: JSON-RPC 1.0 (acceptV1)', () => {
  const v1 = { acceptV1: true };

  it('accepts a request without a jsonrpc member', () => {
    expect(one('{"method":"echo","params":[1,2],"id":3}', v1)).toEqual({
      kind: 'request',
      version: '1.0',
      id: 3,
      method: 'echo',
      params: [1, 2],
    });
  });

  it('treats id null as a notification', () => {
    expect(one('{"method":"tick","params":[1],"id":null}', v1)).toEqual({
      kind: 'notification',
      version: '1.0',
      method: 'tick',
      params: [1],
    });
  });

  it('treats null params as no params', () => {
    expect(one('{"method":"m","params":null,"id":1}', v1)).toMatchObject({
      kind: 'request',
      version: '1.0',
      params: undefined,
    });
  });

  it('still rejects scalar params', () => {
    expect(one('{"method":"m","params":"x","id":1}', v1)).toEqual(invalidRequest(1, '1.0'));
  });

  it('still speaks 2.0 to a 2.0 message', () => {
    expect(one('{"jsonrpc":"2.0","method":"m","id":null}', v1)).toMatchObject({
      kind: 'request',
      version: '2.0',
      id: null,
    });
    expect(one('{"jsonrpc":"1.0","method":"m","id":1}', v1)).toEqual(invalidRequest(1));
  });

  it('classifies a 1.0 success response (error null)', () => {
    expect(one('{"result":[1],"error":null,"id":4}', v1)).toEqual({
      kind: 'success',
      version: '1.0',
      id: 4,
      result: [1],
    });
  });

  it('classifies a 1.0 failure response (result null)', () => {
    expect(one('{"result":null,"error":{"code":12,"message":"bad"},"id":4}', v1)).toEqual({
      kind: 'failure',
      version: '1.0',
      id: 4,
      error: { code: 12, message: 'bad' },
    });
  });

  it('normalizes a 1.0 error that is not an error object', () => {
    expect(one('{"result":null,"error":"boom","id":4}', v1)).toEqual({
      kind: 'failure',
      version: '1.0',
      id: 4,
      error: { code: ErrorCode.InternalError, message: 'boom', data: 'boom' },
    });
  });

  it('answers a 1.0 request with -32600 when acceptV1 is off', () => {
    expect(one('{"method":"echo","params":[1,2],"id":3}')).toEqual(invalidRequest(3));
    expect(one('{"method":"echo","params":[1,2],"id":null}')).toEqual(invalidRequest(null));
  });
});

describe('classifyMessage and isRequestId', () => {
  it('classifies values directly', () => {
    expect(classifyMessage({ jsonrpc: '2.0', method: 'm', id: 1 }, false).kind).toBe('request');
    expect(classifyMessage({ method: 'm', id: 1 }, true)).toMatchObject({
      kind: 'request',
      version: '1.0',
    });
    expect(classifyMessage({ method: 'm', id: 1 }, false).kind).toBe('invalid');
    expect(classifyMessage(undefined, false)).toEqual(invalidRequest(null));
    expect(classifyMessage([], false)).toEqual(invalidRequest(null));
  });

  it.each([
    ['string', 'a', true],
    ['number', 1, true],
    ['fraction', 0.25, true],
    ['null', null, true],
    ['NaN', NaN, false],
    ['Infinity', Infinity, false],
    ['boolean', true, false],
    ['object', {}, false],
    ['array', [], false],
    ['undefined', undefined, false],
  ])('isRequestId(%s) is %s', (_label, value, expected) => {
    expect(isRequestId(value)).toBe(expected);
  });
});

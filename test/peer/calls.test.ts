import { describe, it, expect, vi, afterEach, expectTypeOf } from 'vitest';
import { method } from '../../src/peer/method-descriptor.js';
import { MethodRegistry } from '../../src/peer/method-registry.js';
import type { HandlerContext } from '../../src/peer/handler-context.js';
import {
  InternalError,
  InvalidParamsError,
  JsonRpcError,
  MethodNotFoundError,
} from '../../src/protocol/errors.js';
import { capturingLogger, cleanup, frames, pair, requestIds } from './helpers.js';
import { rejectionOf } from '../support/promises.js';

afterEach(cleanup);

const Subtract = method<[number, number], number>('subtract');
const NamedSubtract = method<{ minuend: number; subtrahend: number }, number>('subtract');

describe('calls in both directions', () => {
  it('a calls b with positional params through a typed descriptor', async () => {
    const { a, b, ta, tb } = pair();
    b.registry.method(Subtract, ([x, y]) => x - y);

    const pending = a.call(Subtract, [42, 23]);
    expectTypeOf(pending).toEqualTypeOf<Promise<number>>();
    expect(await pending).toBe(19);

    expect(ta.sent).toEqual(['{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}']);
    expect(tb.sent).toEqual(['{"jsonrpc":"2.0","result":19,"id":1}']);
  });

  it('b calls a with named params through a typed descriptor', async () => {
    const { a, b, tb } = pair();
    a.registry.method(NamedSubtract, ({ minuend, subtrahend }) => minuend - subtrahend);

    expect(await b.call(NamedSubtract, { minuend: 42, subtrahend: 23 })).toBe(19);
    expect(await b.call(NamedSubtract, { subtrahend: 23, minuend: 42 })).toBe(19);
    expect(frames(tb)[0]).toEqual({
      jsonrpc: '2.0',
      method: 'subtract',
      params: { minuend: 42, subtrahend: 23 },
      id: 1,
    });
  });

  it('both peers call each other at the same time, each answered by its own registry', async () => {
    const { a, b } = pair();
    a.registry.method('where', () => 'at a');
    b.registry.method('where', () => 'at b');

    const [fromA, fromB] = await Promise.all([a.call('where'), b.call('where')]);
    expect(fromA).toBe('at b');
    expect(fromB).toBe('at a');
  });

  it('string method names work without a descriptor', async () => {
    const { a, b } = pair();
    b.registry.method('concat', (params: readonly unknown[]) => params.join('-'));
    expect(await a.call('concat', ['x', 1, true])).toBe('x-1-true');
  });

  it('a handler on a receives a context with the session, method, id and logger of a', async () => {
    const logger = capturingLogger();
    const { a, b, tb } = pair({ logger });
    let seen: HandlerContext<string> | undefined;
    a.registry.method('whoami', (_params, ctx) => {
      seen = ctx;
      ctx.logger.info({ from: ctx.session }, 'handled');
      return ctx.session;
    });

    expect(await b.call('whoami')).toBe('a');
    const requestId = frames(tb)[0].id;
    expect(seen).toBeDefined();
    expect(seen!.session).toBe('a');
    expect(seen!.method).toBe('whoami');
    expect(seen!.id).toBe(requestId);
    expect(logger.at('info')).toEqual([
      expect.objectContaining({ obj: { from: 'a' }, msg: 'handled' }),
    ]);
  });

  it('a handler on b receives the session "b" and the id of that very request', async () => {
    const { a, b, ta } = pair();
    const seen: { session: string; method: string; id: unknown }[] = [];
    b.registry.method('ctx', (_params, ctx) => {
      seen.push({ session: ctx.session, method: ctx.method, id: ctx.id });
      return null;
    });

    await a.call('ctx');
    await a.call('ctx');
    expect(requestIds(ta)).toEqual([1, 2]);
    expect(seen).toEqual([
      { session: 'b', method: 'ctx', id: 1 },
      { session: 'b', method: 'ctx', id: 2 },
    ]);
  });

  it('sync and async handlers both answer', async () => {
    const { a, b } = pair();
    b.registry.method('sync', () => ({ kind: 'sync' }));
    b.registry.method('async', async () => {
      await new Promise((r) => setImmediate(r));
      return { kind: 'async' };
    });

    expect(await a.call('sync')).toEqual({ kind: 'sync' });
    expect(await a.call('async')).toEqual({ kind: 'async' });
  });

  it('a handler returning undefined (sync or async) gives the caller null', async () => {
    const { a, b, tb } = pair();
    b.registry.method('void', () => undefined);
    b.registry.method('asyncVoid', () => Promise.resolve(undefined));

    expect(await a.call('void')).toBeNull();
    expect(await a.call('asyncVoid')).toBeNull();
    expect(tb.sent).toEqual([
      '{"jsonrpc":"2.0","result":null,"id":1}',
      '{"jsonrpc":"2.0","result":null,"id":2}',
    ]);
  });

  it('falsy results survive the round trip unchanged', async () => {
    const { a, b } = pair();
    b.registry.method('echo', ([v]: readonly unknown[]) => v);
    expect(await a.call('echo', [0])).toBe(0);
    expect(await a.call('echo', [false])).toBe(false);
    expect(await a.call('echo', [''])).toBe('');
    expect(await a.call('echo', [null])).toBeNull();
  });
});

describe('errors thrown by handlers', () => {
  it('a JsonRpcError subclass reaches the caller as that class with code, message and data', async () => {
    const { a, b } = pair();
    b.registry.method('check', () => {
      throw new InvalidParamsError('x must be positive', { field: 'x' });
    });

    const err = await rejectionOf(a.call('check', [-1]));
    expect(err).toBeInstanceOf(InvalidParamsError);
    expect(err).toMatchObject({
      code: -32602,
      message: 'x must be positive',
      data: { field: 'x' },
    });
  });

  it('an async rejection with an application JsonRpcError keeps its code and data', async () => {
    const { a, b } = pair();
    b.registry.method('pay', () =>
      Promise.reject(new JsonRpcError(4001, 'Insufficient funds', { balance: 3 })),
    );

    const err = await rejectionOf(a.call('pay', { amount: 10 }));
    expect(err).toBeInstanceOf(JsonRpcError);
    expect(err).toMatchObject({ code: 4001, message: 'Insufficient funds', data: { balance: 3 } });
  });

  it('errors flow from a to b as well', async () => {
    const { a, b } = pair();
    a.registry.method('check', () => {
      throw new InvalidParamsError(undefined, [1, 2]);
    });
    const err = await rejectionOf(b.call('check'));
    expect(err).toBeInstanceOf(InvalidParamsError);
    expect(err).toMatchObject({ code: -32602, message: 'Invalid params', data: [1, 2] });
  });

  it('a plain Error becomes -32603 "Internal error" with no data and nothing leaked', async () => {
    const logger = capturingLogger();
    const { a, b, tb } = pair({}, { logger });
    b.registry.method('boom', () => {
      throw new Error('db password is hunter2');
    });
    b.registry.method('asyncBoom', () => Promise.reject(new Error('async hunter2')));

    for (const name of ['boom', 'asyncBoom']) {
      const err = await rejectionOf(a.call(name));
      expect(err).toBeInstanceOf(InternalError);
      expect(err).toMatchObject({ code: -32603, message: 'Internal error' });
      expect((err as JsonRpcError).data).toBeUndefined();
    }
    for (const frame of tb.sent) {
      expect(frame).not.toContain('hunter2');
      expect(frame).not.toContain('stack');
      expect(JSON.parse(frame).error).toEqual({ code: -32603, message: 'Internal error' });
    }
    // The callee still logs what happened, on its own side.
    const errors = logger.at('error');
    expect(errors).toHaveLength(2);
    expect(errors.map((l) => l.msg)).toEqual(['handler failed', 'handler failed']);
  });

  it('with exposeErrorDetails the data carries the message and stack', async () => {
    const { a, b } = pair({}, { exposeErrorDetails: true });
    b.registry.method('boom', () => {
      throw new TypeError('cannot read x');
    });

    const err = await rejectionOf(a.call('boom'));
    expect(err).toBeInstanceOf(InternalError);
    const data = (err as JsonRpcError).data as { name: string; message: string; stack: string };
    expect(err).toMatchObject({ code: -32603, message: 'Internal error' });
    expect(data.name).toBe('TypeError');
    expect(data.message).toBe('cannot read x');
    expect(typeof data.stack).toBe('string');
    expect(data.stack).toContain('cannot read x');
  });

  it('exposeErrorDetails on the caller does not make the callee expose anything', async () => {
    const { a, b } = pair({ exposeErrorDetails: true }, {});
    b.registry.method('boom', () => {
      throw new Error('secret');
    });
    const err = await rejectionOf(a.call('boom'));
    expect((err as JsonRpcError).data).toBeUndefined();
  });

  it('a handler throwing a non-Error value still gets a proper -32603 reply', async () => {
    const { a, b } = pair({}, { exposeErrorDetails: true });
    b.registry.method('weird', () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error
      throw 'just a string';
    });
    const err = await rejectionOf(a.call('weird'));
    expect(err).toBeInstanceOf(InternalError);
    expect((err as JsonRpcError).data).toEqual({ message: 'just a string' });
  });
});

describe('method registry', () => {
  it('an unknown method rejects with MethodNotFoundError', async () => {
    const { a, b } = pair();
    const err = await rejectionOf(a.call('nope', [1]));
    expect(err).toBeInstanceOf(MethodNotFoundError);
    expect(err).toMatchObject({ code: -32601, message: 'Method not found' });
    const err2 = await rejectionOf(b.call('nope'));
    expect(err2).toBeInstanceOf(MethodNotFoundError);
  });

  it('refuses to register a method in the reserved rpc. space', () => {
    const registry = new MethodRegistry<string>();
    expect(() => registry.method('rpc.x', () => 1)).toThrow(/reserved/);
    expect(() => registry.method(method('rpc.ping'), () => 1)).toThrow(/reserved/);
    expect(registry.has('rpc.x')).toBe(false);
    expect(registry.names()).toEqual([]);
  });

  it('refuses to register the same name twice and keeps the first handler', async () => {
    const { a, b } = pair();
    b.registry.method('dup', () => 'first');
    expect(() => b.registry.method('dup', () => 'second')).toThrow(/already registered/);
    expect(await a.call('dup')).toBe('first');
  });

  it('the unregister function removes the method', async () => {
    const { a, b } = pair();
    const unregister = b.registry.method('temp', () => 'here');
    expect(await a.call('temp')).toBe('here');

    unregister();
    expect(b.registry.has('temp')).toBe(false);
    expect(await rejectionOf(a.call('temp'))).toBeInstanceOf(MethodNotFoundError);

    // The name is free again, and the stale unregister does not remove the new handler.
    b.registry.method('temp', () => 'again');
    unregister();
    expect(await a.call('temp')).toBe('again');
  });

  it('a registry shared by two peers answers on both with each peer’s own session', async () => {
    const registry = new MethodRegistry<string>();
    registry.method('session', (_p, ctx) => ctx.session);
    const { a, b } = pair({ registry }, { registry });
    expect(await a.call('session')).toBe('b');
    expect(await b.call('session')).toBe('a');
  });

  it('does not call a handler spy more than once per call', async () => {
    const { a, b } = pair();
    const spy = vi.fn((params: readonly unknown[]) => params.length);
    b.registry.method('count', spy);
    expect(await a.call('count', [1, 2, 3])).toBe(3);
    expect(spy).toHaveBeenCalledTimes(1);
    expect(spy.mock.calls[0]![0]).toEqual([1, 2, 3]);
  });
});

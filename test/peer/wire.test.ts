import { describe, it, expect, afterEach } from 'vitest';
import { MethodNotFoundError } from '../../src/protocol/errors.js';
import { settle } from '../support/peers.js';
import { capturingLogger, cleanup, never, pair, raw, requestIds } from './helpers.js';
import { deferred, rejectionOf } from '../support/promises.js';
import type { Deferred } from '../support/promises.js';

afterEach(cleanup);

describe('responses that match no pending call', () => {
  it('a success response with an unknown id is dropped with a warn line and no reply', async () => {
    const logger = capturingLogger();
    const r = raw({ logger });

    const replies = await r.send('{"jsonrpc":"2.0","result":5,"id":99}');
    expect(replies).toEqual([]);
    expect(r.peer.isClosed).toBe(false);
    const warns = logger.at('warn');
    expect(warns).toHaveLength(1);
    expect(warns[0]!.obj).toMatchObject({ id: 99 });
    expect(warns[0]!.msg).toMatch(/no pending call/);
    expect(logger.at('debug')).toEqual([]);
  });

  it('an error response with an unknown (string) id is dropped with a warn line', async () => {
    const logger = capturingLogger();
    const r = raw({ logger });

    const replies = await r.send(
      '{"jsonrpc":"2.0","error":{"code":-32000,"message":"x"},"id":"abc"}',
    );
    expect(replies).toEqual([]);
    const warns = logger.at('warn');
    expect(warns).toHaveLength(1);
    expect(warns[0]!.obj).toMatchObject({ id: 'abc', error: { code: -32000, message: 'x' } });
  });

  it('a duplicate response for an already answered call is dropped and the peer keeps working', async () => {
    const logger = capturingLogger();
    const r = raw({ logger });
    const call = r.peer.call('remote', [1]);
    await settle();
    const request = JSON.parse(r.received[0]!);
    expect(request).toEqual({ jsonrpc: '2.0', method: 'remote', params: [1], id: 1 });

    expect(await r.send('{"jsonrpc":"2.0","result":"first","id":1}')).toEqual([]);
    expect(await call).toBe('first');
    expect(await r.send('{"jsonrpc":"2.0","result":"second","id":1}')).toEqual([]);
    expect(logger.at('warn')).toHaveLength(1);

    const pong = await r.send('{"jsonrpc":"2.0","method":"rpc.ping","id":2}');
    expect(pong).toEqual(['{"jsonrpc":"2.0","result":"pong","id":2}']);
  });

  it('a malformed response is dropped with a warn line, never answered', async () => {
    const logger = capturingLogger();
    const r = raw({ logger });
    expect(
      await r.send('{"jsonrpc":"2.0","result":1,"error":{"code":1,"message":"m"},"id":1}'),
    ).toEqual([]);
    expect(logger.at('warn')).toHaveLength(1);
  });
});

describe('request ids', () => {
  it('are never reused while pending, and each response reaches its own caller', async () => {
    const { a, b, ta } = pair();
    const gates: Deferred<void>[] = [];
    b.registry.method('echo', async ([n]: readonly unknown[]) => {
      const gate = deferred();
      gates.push(gate);
      await gate.promise;
      return n;
    });

    const count = 200;
    const calls = Array.from({ length: count }, (_, i) => a.call('echo', [i]));
    await settle();
    expect(gates).toHaveLength(count);
    expect(a.pendingCount).toBe(count);

    const ids = requestIds(ta);
    expect(ids).toHaveLength(count);
    expect(new Set(ids).size).toBe(count);
    for (const id of ids) expect(Number.isSafeInteger(id)).toBe(true);

    // Answer in reverse order: results must still match their calls.
    for (const gate of [...gates].reverse()) gate.resolve();
    expect(await Promise.all(calls)).toEqual(Array.from({ length: count }, (_, i) => i));
  });

  it('new calls made while older ones are still pending get fresh ids', async () => {
    const { a, b, ta } = pair();
    b.registry.method('hang', () => never());
    b.registry.method('quick', () => 1);

    const hanging = [0, 1, 2].map(() => rejectionOf(a.call('hang')));
    for (let i = 0; i < 20; i++) await a.call('quick');
    await a.batch([{ method: 'quick' }, { method: 'quick' }]);
    const more = [0, 1].map(() => rejectionOf(a.call('hang')));
    await settle();

    const ids = requestIds(ta);
    expect(ids).toHaveLength(3 + 20 + 2 + 2);
    expect(new Set(ids).size).toBe(ids.length);
    a.close();
    await Promise.all([...hanging, ...more]);
  });

  it('a string id and a numeric id are answered under their own id', async () => {
    const r = raw();
    r.peer.registry.method('echo', (p) => p);
    const replies = await r.send('{"jsonrpc":"2.0","method":"echo","params":["s"],"id":"1"}');
    expect(replies).toEqual(['{"jsonrpc":"2.0","result":["s"],"id":"1"}']);
    const replies2 = await r.send('{"jsonrpc":"2.0","method":"echo","params":["n"],"id":1}');
    expect(replies2).toEqual(['{"jsonrpc":"2.0","result":["n"],"id":1}']);
  });
});

describe('reserved rpc.* methods', () => {
  it('answers an rpc.ping request with "pong"', async () => {
    const r = raw();
    expect(await r.send('{"jsonrpc":"2.0","method":"rpc.ping","id":7}')).toEqual([
      '{"jsonrpc":"2.0","result":"pong","id":7}',
    ]);
  });

  it('rpc.ping works between two peers in both directions', async () => {
    const { a, b } = pair();
    expect(await a.call('rpc.ping')).toBe('pong');
    expect(await b.call('rpc.ping')).toBe('pong');
  });

  it('answers other rpc.* requests with -32601', async () => {
    const r = raw();
    expect(await r.send('{"jsonrpc":"2.0","method":"rpc.other","id":8}')).toEqual([
      '{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":8}',
    ]);
    // rpc.cancel is a notification; sent as a request it is just an unknown method.
    expect(
      await r.send('{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":1},"id":9}'),
    ).toEqual(['{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":9}']);
  });

  it('a peer calling an unknown rpc.* method gets MethodNotFoundError', async () => {
    const { a } = pair();
    const err = await rejectionOf(a.call('rpc.nope'));
    expect(err).toBeInstanceOf(MethodNotFoundError);
  });

  it('an rpc.* notification is never answered', async () => {
    const r = raw();
    expect(await r.send('{"jsonrpc":"2.0","method":"rpc.ping"}')).toEqual([]);
    expect(await r.send('{"jsonrpc":"2.0","method":"rpc.whatever","params":[1]}')).toEqual([]);
  });
});

describe('invalid input', () => {
  it('answers a parse error with -32700 and null id, and keeps going', async () => {
    const r = raw();
    expect(await r.send('{not json')).toEqual([
      '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}',
    ]);
    expect(await r.send('{"jsonrpc":"2.0","method":"rpc.ping","id":1}')).toEqual([
      '{"jsonrpc":"2.0","result":"pong","id":1}',
    ]);
  });
});

import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { GetData, Subtract, Sum } from '../../demo/service.js';
import {
  CancelledError,
  ErrorCode,
  InternalError,
  InvalidParamsError,
  JsonRpcError,
  MethodNotFoundError,
  TimeoutError,
} from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { deferred, rejectionOf, untilAborted } from '../support/promises.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('Node client <-> gateway calls', () => {
  it('answers calls with positional and named params', async () => {
    const { url } = await res.demoGateway();
    const client = res.client(url);
    await client.opened();

    expect(await client.call('subtract', [42, 23])).toBe(19);
    expect(await client.call('subtract', [23, 42])).toBe(-19);
    expect(await client.call('subtract', { subtrahend: 23, minuend: 42 })).toBe(19);
    expect(await client.call('subtract', { minuend: 42, subtrahend: 23 })).toBe(19);
    expect(await client.call('sum', [1, 2, 4])).toBe(7);
    expect(await client.call('get_data')).toEqual(['hello', 5]);
  });

  it('calls through the typed descriptors of the demo service', async () => {
    const { url } = await res.demoGateway();
    const client = res.client(url);

    const difference = await client.call(Subtract, [42, 23]);
    expectTypeOf(difference).toEqualTypeOf<number>();
    expect(difference).toBe(19);
    expect(await client.call(Subtract, { minuend: 10, subtrahend: 15 })).toBe(-5);

    const total = await client.call(Sum, [1, 2, 3, 4]);
    expectTypeOf(total).toEqualTypeOf<number>();
    expect(total).toBe(10);

    const data = await client.call(GetData, undefined);
    expectTypeOf(data).toEqualTypeOf<[string, number]>();
    expect(data).toEqual(['hello', 5]);
  });

  it('delivers errors as JsonRpcError subclasses with their code', async () => {
    const { url, gateway } = await res.demoGateway();
    gateway.method('fail.plain', () => {
      throw new Error('secret internals');
    });
    gateway.method('fail.custom', () => {
      throw new JsonRpcError(-32050, 'Quota exceeded', { retryAfter: 3 });
    });
    gateway.method('fail.async', () =>
      Promise.reject(new InvalidParamsError('no', { field: 'x' })),
    );
    const client = res.client(url);

    const invalid = await rejectionOf(client.call(Subtract, [1] as unknown as [number, number]));
    expect(invalid).toBeInstanceOf(InvalidParamsError);
    expect(invalid).toBeInstanceOf(JsonRpcError);
    expect(invalid).toMatchObject({ code: ErrorCode.InvalidParams });

    const invalidNamed = await rejectionOf(client.call('subtract', { minuend: 'a' }));
    expect(invalidNamed).toBeInstanceOf(InvalidParamsError);

    const notFound = await rejectionOf(client.call('foo.get', { name: 'myself' }));
    expect(notFound).toBeInstanceOf(MethodNotFoundError);
    expect(notFound).toMatchObject({ code: -32601, message: 'Method not found' });

    const reserved = await rejectionOf(client.call('rpc.nothing'));
    expect(reserved).toBeInstanceOf(MethodNotFoundError);

    const internal = await rejectionOf(client.call('fail.plain'));
    expect(internal).toBeInstanceOf(InternalError);
    expect(internal).toMatchObject({ code: -32603, message: 'Internal error' });
    expect(JSON.stringify((internal as JsonRpcError).data ?? null)).not.toContain('secret');

    const custom = await rejectionOf(client.call('fail.custom'));
    expect(custom).toBeInstanceOf(JsonRpcError);
    expect(custom).toMatchObject({
      code: -32050,
      message: 'Quota exceeded',
      data: { retryAfter: 3 },
    });

    const asyncFailure = await rejectionOf(client.call('fail.async'));
    expect(asyncFailure).toBeInstanceOf(InvalidParamsError);
    expect(asyncFailure).toMatchObject({ code: -32602, data: { field: 'x' } });

    // The connection survives every one of these.
    expect(await client.call(Subtract, [2, 1])).toBe(1);
    expect(client.state).toBe('open');
  });

  it('answers the reserved rpc.ping', async () => {
    const { url } = await res.demoGateway();
    const client = res.client(url);
    expect(await client.call('rpc.ping')).toBe('pong');
  });

  it('resolves 1000 concurrent calls from one client, each with its own result', async () => {
    const { url } = await res.demoGateway();
    const client = res.client(url);
    await client.opened();

    const calls = Array.from({ length: 1000 }, (_, i) =>
      i % 2 === 0 ? client.call(Subtract, [i * 3, i]) : client.call(Sum, [i, i, 1]),
    );
    const results = await Promise.all(calls);
    expect(results).toHaveLength(1000);
    results.forEach((result, i) => expect(result).toBe(i % 2 === 0 ? i * 2 : 2 * i + 1));
  });

  it('serves 20 clients making 50 calls each', async () => {
    const { url, gateway } = await res.demoGateway();
    const clients = Array.from({ length: 20 }, () => res.client(url));
    await Promise.all(clients.map((c) => c.opened()));
    expect(gateway.sessions.size).toBe(20);

    const perClient = await Promise.all(
      clients.map((client, c) =>
        Promise.all(Array.from({ length: 50 }, (_, i) => client.call(Subtract, [c * 1000 + i, c]))),
      ),
    );
    perClient.forEach((results, c) =>
      expect(results).toEqual(Array.from({ length: 50 }, (_, i) => c * 1000 + i - c)),
    );
  });

  it('answers Server busy beyond limits.maxInFlight and recovers once calls finish', async () => {
    const { url, gateway } = await res.demoGateway({ limits: { maxInFlight: 2 } });
    const release = deferred();
    let started = 0;
    const bothStarted = deferred();
    gateway.method('slow', async () => {
      if (++started === 2) bothStarted.resolve();
      await release.promise;
      return 'done';
    });
    const client = res.client(url);
    const first = client.call('slow');
    const second = client.call('slow');
    const third = rejectionOf(client.call('slow'));
    await bothStarted.promise;
    const busy = await third;
    expect(busy).toBeInstanceOf(JsonRpcError);
    expect(busy).toMatchObject({ code: ErrorCode.ServerBusy, data: { maxInFlight: 2 } });
    release.resolve();
    expect(await Promise.all([first, second])).toEqual(['done', 'done']);
    expect(await client.call('slow')).toBe('done');
  });

  it('times out a call with TimeoutError, cancels the server handler; the connection stays usable', async () => {
    const { url, gateway } = await res.demoGateway();
    const started = deferred();
    const aborted = deferred();
    gateway.method('hang', (_params, ctx) => {
      ctx.signal.addEventListener('abort', () => aborted.resolve());
      started.resolve();
      return untilAborted(ctx.signal);
    });
    const client = res.client(url);
    await client.opened();

    const err = await rejectionOf(client.call('hang', [], { timeoutMs: 50 }));
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err).toMatchObject({ method: 'hang', timeoutMs: 50 });
    await started.promise;
    // The timeout sent rpc.cancel: the handler's signal fires on the server.
    await aborted.promise;
    expect(await client.call(Subtract, [5, 2])).toBe(3);
    expect(client.state).toBe('open');
  });

  it('cancels a call through an AbortSignal and the server handler sees the abort', async () => {
    const { url, gateway } = await res.demoGateway();
    const started = deferred();
    const aborted = deferred();
    gateway.method('hang', (_params, ctx) => {
      ctx.signal.addEventListener('abort', () => aborted.resolve());
      started.resolve();
      return untilAborted(ctx.signal);
    });
    const client = res.client(url);
    const controller = new AbortController();
    const call = rejectionOf(client.call('hang', undefined, { signal: controller.signal }));
    await started.promise;
    controller.abort(new Error('user gave up'));
    expect(await call).toBeInstanceOf(CancelledError);
    await aborted.promise;
    expect(await client.call(Sum, [1, 1])).toBe(2);
  });

  it('delivers client notifications to server handlers and session.notifications$', async () => {
    const { url, gateway } = await res.demoGateway();
    const viaHandler: unknown[] = [];
    gateway.method('log', (params) => {
      viaHandler.push(params);
    });
    const sessionPromise = firstValueFrom(gateway.connected$);
    const client = res.client(url);
    const session = await sessionPromise;
    const viaStream: unknown[] = [];
    session.notifications$.subscribe((n) => viaStream.push(n));

    client.notify('log', { line: 1 });
    client.notify('log', ['two']);
    // Frames are handled in order: once this answer arrives the notifications were handled.
    expect(await client.call(Sum, [0])).toBe(0);
    expect(viaHandler).toEqual([{ line: 1 }, ['two']]);
    expect(viaStream).toEqual([
      { method: 'log', params: { line: 1 } },
      { method: 'log', params: ['two'] },
    ]);
  });
});

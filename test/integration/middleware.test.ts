import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { JsonRpcError, ServerError } from '../../src/index.js';
import type { Middleware, RpcClient, Session } from '../../src/index.js';
import type { Middleware as ClientMiddleware } from '../../src/client/index.js';
import { CaptureLogger } from '../support/logging.js';
import { rejectionOf } from '../support/promises.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

type Context = { user: string };
type Mw = Middleware<Session<Context>>;

/** Logging: one line per call, with its kind, outcome and duration (the docs' first example). */
function logCalls(): Mw {
  return async (ctx, next) => {
    const started = performance.now();
    try {
      const result = await next();
      ctx.logger.info(
        { kind: ctx.kind, method: ctx.method, ms: performance.now() - started },
        'ok',
      );
      return result;
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      ctx.logger.info({ kind: ctx.kind, method: ctx.method, code }, 'failed');
      throw err;
    }
  };
}

/** Timing: durations by method, as a histogram would take them. */
function timeCalls(observed: Map<string, number[]>): Mw {
  return async (ctx, next) => {
    const started = performance.now();
    try {
      return await next();
    } finally {
      const list = observed.get(ctx.method) ?? [];
      list.push(performance.now() - started);
      observed.set(ctx.method, list);
    }
  };
}

/** A per-method limit: at most `limit` calls of `method` per session, then -32003 with data. */
function perMethodLimit(method: string, limit: number): Mw {
  const used = new WeakMap<Session<Context>, number>();
  return (ctx, next) => {
    if (ctx.method !== method) return next();
    const count = (used.get(ctx.session) ?? 0) + 1;
    used.set(ctx.session, count);
    if (count > limit) {
      throw new ServerError(-32003, 'Rate limited', { method, limit });
    }
    return next();
  };
}

class NotFound extends Error {}

/** Error mapping: the application's own errors become JSON-RPC errors. */
const mapErrors: Mw = async (_ctx, next) => {
  try {
    return await next();
  } catch (err) {
    if (err instanceof NotFound) throw new JsonRpcError(404, err.message);
    throw err;
  }
};

describe('middleware on the gateway', () => {
  it('logs, times, limits per method and maps errors, around handlers that read its state', async () => {
    const logger = new CaptureLogger();
    const timings = new Map<string, number[]>();
    const { url, gateway } = await res.gateway<Context>({
      logger,
      authenticate: () => ({ user: 'alice' }),
      middleware: [
        logCalls(),
        timeCalls(timings),
        mapErrors,
        (ctx, next) => {
          ctx.state.user = ctx.session.context.user;
          return next();
        },
        perMethodLimit('expensive', 2),
      ],
    });
    gateway.method('whoami', (_params, ctx) => ctx.state.user);
    gateway.method('expensive', async () => {
      await new Promise((r) => setTimeout(r, 5));
      return 'done';
    });
    gateway.method('lookup', ([id]: [number]) => {
      throw new NotFound(`no row ${id}`);
    });

    const client = res.client(url);
    expect(await client.call('whoami')).toBe('alice');
    expect(await client.call('expensive')).toBe('done');
    expect(await client.call('expensive')).toBe('done');
    const limited = await rejectionOf(client.call('expensive'));
    expect(limited).toBeInstanceOf(JsonRpcError);
    expect(limited).toMatchObject({
      code: -32003,
      message: 'Rate limited',
      data: { method: 'expensive', limit: 2 },
    });
    expect(await rejectionOf(client.call('lookup', [9]))).toMatchObject({
      code: 404,
      message: 'no row 9',
    });

    const lines = logger.records
      .filter((r) => r.msg === 'ok' || r.msg === 'failed')
      .map((r) => {
        const { kind, method, code } = r.obj as { kind: string; method: string; code?: number };
        return [r.msg, kind, method, code ?? null, typeof r.bindings.session];
      });
    expect(lines).toEqual([
      ['ok', 'call', 'whoami', null, 'string'],
      ['ok', 'call', 'expensive', null, 'string'],
      ['ok', 'call', 'expensive', null, 'string'],
      ['failed', 'call', 'expensive', -32003, 'string'],
      ['failed', 'call', 'lookup', 404, 'string'],
    ]);
    expect(timings.get('expensive')).toHaveLength(3);
    expect(Math.min(...timings.get('expensive')!.slice(0, 2))).toBeGreaterThanOrEqual(4);
    expect(timings.get('whoami')).toHaveLength(1);
  });

  it('sees a subscribe with its topic, and can refuse it; unknown methods and rpc.ping pass by', async () => {
    const seen: unknown[] = [];
    const { url, gateway } = await res.gateway({
      middleware: [
        (ctx, next) => {
          seen.push([ctx.kind, ctx.method, ctx.topic]);
          if (ctx.topic === 'prices.SECRET') {
            throw new ServerError(-32004, 'Not for you', { topic: ctx.topic });
          }
          return next();
        },
      ],
    });
    gateway.topic('prices.*');
    const client = res.client(url);

    const first = firstValueFrom(client.subscribe<{ p: number }>('prices.BTC'));
    // The subscription is live once the subscribe has been answered: publish until it arrives.
    const publishing = setInterval(() => void gateway.publish('prices.BTC', { p: 1 }), 10);
    try {
      expect(await first).toEqual({ p: 1 });
    } finally {
      clearInterval(publishing);
    }
    const refused = await rejectionOf(firstValueFrom(client.subscribe('prices.SECRET')));
    expect(refused).toMatchObject({ code: -32004, data: { topic: 'prices.SECRET' } });
    await rejectionOf(client.call('no.such.method'));
    expect(await client.call('rpc.ping')).toBe('pong');

    expect(seen).toEqual([
      ['subscribe', 'subscribe', 'prices.BTC'],
      // firstValueFrom took its value and unsubscribed: a call like any other.
      ['call', 'unsubscribe', undefined],
      ['subscribe', 'subscribe', 'prices.SECRET'],
    ]);
  });

  it('runs around calls over HTTP POST too', async () => {
    const seen: string[] = [];
    const { httpUrl, gateway } = await res.gateway({
      middleware: [
        async (ctx, next) => {
          seen.push(ctx.method);
          return { wrapped: await next() };
        },
      ],
    });
    gateway.method('echo', (params) => params);
    const response = await fetch(`${httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'echo', params: [1] }),
    });
    expect(await response.json()).toEqual({ jsonrpc: '2.0', id: 1, result: { wrapped: [1] } });
    expect(seen).toEqual(['echo']);
  });
});

describe('middleware on the client', () => {
  it('runs around the calls the server makes to the client, with the client as session', async () => {
    const seen: unknown[] = [];
    const clientMiddleware: ClientMiddleware<RpcClient> = async (ctx, next) => {
      seen.push([ctx.kind, ctx.method, ctx.id !== undefined, ctx.session === client]);
      if (ctx.method === 'client.blocked') throw new JsonRpcError(-32004, 'Refused by the client');
      ctx.state.via = 'middleware';
      return next();
    };
    const { url, gateway } = await res.gateway();
    const sessionPromise = firstValueFrom(gateway.connected$);
    const client = res.client(url, { middleware: [clientMiddleware] });
    client.method('client.multiply', ([a, b]: [number, number], ctx) => ({
      product: a * b,
      via: ctx.state.via,
    }));
    client.method('client.blocked', () => 'never');
    const session = await sessionPromise;

    expect(await session.call('client.multiply', [6, 7])).toEqual({
      product: 42,
      via: 'middleware',
    });
    expect(await rejectionOf(session.call('client.blocked'))).toMatchObject({ code: -32004 });
    expect(seen).toEqual([
      ['call', 'client.multiply', true, true],
      ['call', 'client.blocked', true, true],
    ]);
  });
});

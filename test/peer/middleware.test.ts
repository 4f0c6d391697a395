import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { composeMiddleware } from '../../src/peer/middleware.js';
import { NOISE_WARN_LIMIT } from '../../src/peer/noise-log.js';
import type { Middleware, MiddlewareContext } from '../../src/peer/middleware.js';
import type { HandlerContext } from '../../src/peer/handler-context.js';
import { peerConfig } from '../../src/peer/peer.js';
import type { PeerOptions } from '../../src/peer/peer.js';
import { JsonRpcError, ServerError } from '../../src/protocol/errors.js';
import { settle } from '../support/peers.js';
import { capturingLogger, cleanup, raw } from './helpers.js';
import { deferred } from '../support/promises.js';

afterEach(cleanup);

type Mw = Middleware<string>;
type Ctx = MiddlewareContext<string>;

/** A raw peer with `middleware`, answering `send(request)` with the parsed reply frames. */
function rawWith(middleware: Mw[] | undefined, options: Partial<PeerOptions<string>> = {}) {
  const r = raw({ middleware, ...options });
  return {
    ...r,
    async ask(message: unknown, ticks = 5): Promise<unknown[]> {
      return (await r.send(JSON.stringify(message), ticks)).map((t): unknown => JSON.parse(t));
    },
  };
}

const call = (method: string, params?: unknown, id: number | string = 1) => ({
  jsonrpc: '2.0',
  id,
  method,
  ...(params === undefined ? {} : { params }),
});

describe('middleware around incoming calls', () => {
  it('runs a chain of three in order around the handler, in and out', async () => {
    const trace: string[] = [];
    const named =
      (name: string): Mw =>
      async (_ctx, next) => {
        trace.push(`${name}>`);
        await next();
        trace.push(`<${name}`);
      };
    const r = rawWith([named('a'), named('b'), named('c')]);
    r.peer.registry.method('add', ([x, y]: number[]) => {
      trace.push('handler');
      return x! + y!;
    });

    expect(await r.ask(call('add', [2, 3]))).toEqual([{ jsonrpc: '2.0', id: 1, result: 5 }]);
    expect(trace).toEqual(['a>', 'b>', 'c>', 'handler', '<c', '<b', '<a']);
  });

  it('next() resolves with the result and rejects with the error the handler threw', async () => {
    const seen: unknown[] = [];
    const observe: Mw = async (_ctx, next) => {
      try {
        seen.push({ result: await next() });
      } catch (err) {
        seen.push({ error: (err as JsonRpcError).code });
        throw err;
      }
    };
    const r = rawWith([observe]);
    r.peer.registry.method('ok', () => ({ v: 1 }));
    r.peer.registry.method('bad', () => {
      throw new ServerError(-32050, 'nope', { why: 'x' });
    });

    expect(await r.ask(call('ok'))).toEqual([{ jsonrpc: '2.0', id: 1, result: { v: 1 } }]);
    expect(await r.ask(call('bad', undefined, 2))).toEqual([
      { jsonrpc: '2.0', id: 2, error: { code: -32050, message: 'nope', data: { why: 'x' } } },
    ]);
    expect(seen).toEqual([{ result: { v: 1 } }, { error: -32050 }]);
  });

  it('sees the call: kind, method, params, id, session, logger, signal', async () => {
    let seen: Ctx | undefined;
    const r = rawWith([
      (ctx, next) => {
        seen = ctx;
        return next();
      },
    ]);
    r.peer.registry.method('echo', (p) => p);
    await r.ask(call('echo', { a: 1 }, 'x7'));
    expect(seen).toMatchObject({
      kind: 'call',
      method: 'echo',
      params: { a: 1 },
      id: 'x7',
      session: 'raw',
      topic: undefined,
    });
    expect(seen!.signal).toBeInstanceOf(AbortSignal);
    expect(typeof seen!.logger.info).toBe('function');
  });

  it('short-circuits: a value returned without next() is the result; the handler never runs', async () => {
    let ran = 0;
    const cached: Mw = (ctx) => (ctx.method === 'slow' ? 'from cache' : undefined);
    const r = rawWith([cached]);
    r.peer.registry.method('slow', () => {
      ran++;
      return 'computed';
    });
    expect(await r.ask(call('slow'))).toEqual([{ jsonrpc: '2.0', id: 1, result: 'from cache' }]);
    expect(ran).toBe(0);
  });

  it('short-circuits with an error: a JsonRpcError thrown before next() is the answer', async () => {
    let ran = 0;
    const limit: Mw = () => {
      throw new ServerError(-32003, 'Rate limited', { method: 'hot', limitPerSecond: 1 });
    };
    const r = rawWith([limit]);
    r.peer.registry.method('hot', () => ran++);
    expect(await r.ask(call('hot'))).toEqual([
      {
        jsonrpc: '2.0',
        id: 1,
        error: {
          code: -32003,
          message: 'Rate limited',
          data: { method: 'hot', limitPerSecond: 1 },
        },
      },
    ]);
    expect(ran).toBe(0);
  });

  it('maps errors: the handler throws, the middleware answers with its own code', async () => {
    class NotFoundInDb extends Error {}
    const mapErrors: Mw = async (_ctx, next) => {
      try {
        return await next();
      } catch (err) {
        if (err instanceof NotFoundInDb) throw new JsonRpcError(404, 'Not found');
        throw err;
      }
    };
    const r = rawWith([mapErrors]);
    r.peer.registry.method('get', async () => {
      await settle(1);
      throw new NotFoundInDb('row 9');
    });
    expect(await r.ask(call('get'))).toEqual([
      { jsonrpc: '2.0', id: 1, error: { code: 404, message: 'Not found' } },
    ]);
  });

  it('answers a non-JsonRpcError from a middleware as a handler failure: -32603, details only when exposed', async () => {
    const broken: Mw = () => {
      throw new Error('middleware bug');
    };
    const logger = capturingLogger();
    const hidden = rawWith([broken], { logger });
    hidden.peer.registry.method('m', () => 1);
    expect(await hidden.ask(call('m'))).toEqual([
      { jsonrpc: '2.0', id: 1, error: { code: -32603, message: 'Internal error' } },
    ]);
    expect(logger.at('error').map((l) => l.msg)).toEqual(['handler failed']);

    const shown = rawWith([broken], { exposeErrorDetails: true });
    shown.peer.registry.method('m', () => 1);
    const [reply] = (await shown.ask(call('m'))) as { error: { data: { message: string } } }[];
    expect(reply!.error.data.message).toBe('middleware bug');
  });

  it('replaces the result with the value a middleware returns after next()', async () => {
    const wrap: Mw = async (_ctx, next) => ({ data: await next(), servedBy: 'node-1' });
    const r = rawWith([wrap]);
    r.peer.registry.method('n', () => 7);
    expect(await r.ask(call('n'))).toEqual([
      { jsonrpc: '2.0', id: 1, result: { data: 7, servedBy: 'node-1' } },
    ]);
  });

  it('enriches the context: state a middleware sets is what the handler reads', async () => {
    const states: unknown[] = [];
    const auth: Mw = (ctx, next) => {
      ctx.state.user = `user-of-${ctx.session}`;
      return next();
    };
    const trace: Mw = (ctx, next) => {
      states.push({ ...ctx.state });
      ctx.state.traceId = `t-${String(ctx.id)}`;
      return next();
    };
    const r = rawWith([auth, trace]);
    r.peer.registry.method('whoami', (_p, ctx: HandlerContext<string>) => ctx.state);
    expect(await r.ask(call('whoami', undefined, 3))).toEqual([
      { jsonrpc: '2.0', id: 3, result: { user: 'user-of-raw', traceId: 't-3' } },
    ]);
    expect(states).toEqual([{ user: 'user-of-raw' }]);
    // Each call has its own state.
    expect(await r.ask(call('whoami', undefined, 4))).toEqual([
      { jsonrpc: '2.0', id: 4, result: { user: 'user-of-raw', traceId: 't-4' } },
    ]);
  });

  it('refuses a second next(): it rejects, the handler runs once', async () => {
    let ran = 0;
    const twice: Mw = async (_ctx, next) => {
      await next();
      return next();
    };
    const r = rawWith([twice], { exposeErrorDetails: true });
    r.peer.registry.method('once', () => ++ran);
    const [reply] = (await r.ask(call('once'))) as {
      error: { code: number; data: { message: string } };
    }[];
    expect(reply!.error.code).toBe(-32603);
    expect(reply!.error.data.message).toBe('middleware[0] called next() more than once');
    expect(ran).toBe(1);
  });

  it('waits for async handlers, and passes the call signal through (rpc.cancel aborts it)', async () => {
    const gate = deferred<string>();
    const timings: { method: string; ms: number }[] = [];
    let signal: AbortSignal | undefined;
    const timing: Mw = async (ctx, next) => {
      const start = performance.now();
      signal = ctx.signal;
      try {
        return await next();
      } finally {
        timings.push({ method: ctx.method, ms: performance.now() - start });
      }
    };
    const r = rawWith([timing]);
    r.peer.registry.method('wait', () => gate.promise);
    const pending = r.ask(call('wait', undefined, 9), 20);
    await settle(2);
    expect(timings).toEqual([]);
    expect(signal!.aborted).toBe(false);
    gate.resolve('done');
    expect(await pending).toEqual([{ jsonrpc: '2.0', id: 9, result: 'done' }]);
    expect(timings).toHaveLength(1);
    expect(timings[0]!.method).toBe('wait');

    const stuck = deferred<string>();
    r.peer.registry.method('stuck', (_p, ctx: HandlerContext<string>) => {
      ctx.signal.addEventListener('abort', () => stuck.reject(new Error('aborted')));
      return stuck.promise;
    });
    const cancelled = r.ask(call('stuck', undefined, 10), 20);
    await settle(2);
    await r.ask({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id: 10 } }, 1);
    expect(signal!.aborted).toBe(true);
    expect(await cancelled).toEqual([
      { jsonrpc: '2.0', id: 10, error: { code: -32001, message: 'Request cancelled' } },
    ]);
  });

  it('wraps each member of a batch once, with the batch answered as one frame', async () => {
    const seen: unknown[] = [];
    const log: Mw = async (ctx, next) => {
      seen.push([ctx.kind, ctx.method, ctx.id ?? null]);
      await next();
    };
    const r = rawWith([log]);
    r.peer.registry.method('double', ([n]: number[]) => n! * 2);
    r.peer.registry.method('note', () => undefined);
    const frames = await r.ask([
      call('double', [1], 1),
      { jsonrpc: '2.0', method: 'note', params: [] },
      call('double', [2], 2),
    ]);
    expect(frames).toEqual([
      [
        { jsonrpc: '2.0', id: 1, result: 2 },
        { jsonrpc: '2.0', id: 2, result: 4 },
      ],
    ]);
    expect(seen).toHaveLength(3);
    expect(seen).toEqual(
      expect.arrayContaining([
        ['call', 'double', 1],
        ['notification', 'note', null],
        ['call', 'double', 2],
      ]),
    );
  });
});

describe('what middleware does not wrap', () => {
  it('reserved rpc. methods, unknown methods, refused and unauthorized calls pass by it', async () => {
    const seen: string[] = [];
    const log: Mw = (ctx, next) => {
      seen.push(ctx.method);
      return next();
    };
    const r = rawWith([log], {
      reservedMethods: new Map([['rpc.discover', () => ({ openrpc: '1.3.2' })]]),
      authorize: (method) => method !== 'secret',
    });
    r.peer.registry.method('secret', () => 1);
    r.peer.registry.method('open', () => 2);

    expect(await r.ask(call('rpc.ping'))).toEqual([{ jsonrpc: '2.0', id: 1, result: 'pong' }]);
    expect(await r.ask(call('rpc.discover'))).toEqual([
      { jsonrpc: '2.0', id: 1, result: { openrpc: '1.3.2' } },
    ]);
    expect(await r.ask(call('missing'))).toMatchObject([{ error: { code: -32601 } }]);
    expect(await r.ask(call('secret'))).toMatchObject([{ error: { code: -32004 } }]);
    expect(await r.ask(call('open'))).toEqual([{ jsonrpc: '2.0', id: 1, result: 2 }]);
    expect(seen).toEqual(['open']);
  });

  it('calls refused by the rate limit never reach it', async () => {
    const seen: string[] = [];
    let tokens = 1;
    const r = rawWith(
      [
        (ctx, next) => {
          seen.push(ctx.method);
          return next();
        },
      ],
      { admit: { take: () => tokens-- > 0 } },
    );
    r.peer.registry.method('m', () => 1);
    expect(await r.ask(call('m', undefined, 1))).toEqual([{ jsonrpc: '2.0', id: 1, result: 1 }]);
    expect(await r.ask(call('m', undefined, 2))).toMatchObject([{ error: { code: -32003 } }]);
    expect(seen).toEqual(['m']);
  });
});

describe('middleware around notifications and subscribes', () => {
  it('wraps a notification handler (kind notification, no id); a short-circuit skips the handler', async () => {
    const seen: unknown[] = [];
    const handled: unknown[] = [];
    const gate: Mw = async (ctx, next) => {
      seen.push({ kind: ctx.kind, method: ctx.method, id: ctx.id, params: ctx.params });
      if ((ctx.params as unknown[])[0] === 'drop') return;
      await next();
    };
    const r = rawWith([gate]);
    r.peer.registry.method('log', (p) => {
      handled.push(p);
    });
    expect(await r.ask({ jsonrpc: '2.0', method: 'log', params: ['keep'] })).toEqual([]);
    expect(await r.ask({ jsonrpc: '2.0', method: 'log', params: ['drop'] })).toEqual([]);
    expect(handled).toEqual([['keep']]);
    expect(seen).toEqual([
      { kind: 'notification', method: 'log', id: undefined, params: ['keep'] },
      { kind: 'notification', method: 'log', id: undefined, params: ['drop'] },
    ]);
  });

  it('a notification whose middleware throws is logged like a failed handler', async () => {
    const logger = capturingLogger();
    const r = rawWith(
      [
        () => {
          throw new Error('refused');
        },
      ],
      { logger },
    );
    r.peer.registry.method('log', () => undefined);
    await r.ask({ jsonrpc: '2.0', method: 'log', params: [] });
    expect(logger.at('warn').map((l) => l.msg)).toEqual(['notification handler failed']);
  });

  it("failed notification handlers are the other side's noise: the first NOISE_WARN_LIMIT at warn, the rest at debug", async () => {
    const logger = capturingLogger();
    const r = rawWith([], { logger });
    r.peer.registry.method('log', () => {
      throw new Error('bad params');
    });
    const sent = NOISE_WARN_LIMIT + 5;
    for (let i = 0; i < sent; i++) await r.ask({ jsonrpc: '2.0', method: 'log', params: [] });
    const failed = logger.lines.filter((l) => l.msg === 'notification handler failed');
    expect(failed.map((l) => l.level)).toEqual([
      ...Array<string>(NOISE_WARN_LIMIT).fill('warn'),
      ...Array<string>(sent - NOISE_WARN_LIMIT).fill('debug'),
    ]);
  });

  it('sees a call of the subscribe method as kind subscribe, with its topic', async () => {
    const seen: unknown[] = [];
    const r = rawWith(
      [
        (ctx, next) => {
          seen.push([ctx.kind, ctx.topic]);
          return next();
        },
      ],
      {
        subscribeMethod: {
          name: 'subscribe',
          topicOf: (p) => (Array.isArray(p) && typeof p[0] === 'string' ? p[0] : undefined),
        },
      },
    );
    r.peer.registry.method('subscribe', () => 'sub-1');
    r.peer.registry.method('other', () => 'x');
    await r.ask(call('subscribe', ['prices.BTC']));
    await r.ask(call('subscribe', [42]));
    await r.ask(call('other', ['prices.BTC']));
    expect(seen).toEqual([
      ['subscribe', 'prices.BTC'],
      ['subscribe', undefined],
      ['call', undefined],
    ]);
  });
});

describe('without middleware', () => {
  it('composes nothing: no chain for undefined or an empty list', () => {
    expect(peerConfig({}).middleware).toBeUndefined();
    expect(peerConfig({ middleware: [] }).middleware).toBeUndefined();
    expect(peerConfig({ middleware: [(_c, n) => n()] }).middleware).toBeTypeOf('function');
  });

  it('handlers get the running call itself, and an empty state', async () => {
    let ctx: HandlerContext<string> | undefined;
    const r = rawWith(undefined);
    r.peer.registry.method('m', (_p, c: HandlerContext<string>) => {
      ctx = c;
      return c.state;
    });
    expect(await r.ask(call('m'))).toEqual([{ jsonrpc: '2.0', id: 1, result: {} }]);
    expect(ctx!.constructor.name).toBe('RunningCall');
  });

  it('refuses entries that are not functions, naming the index', () => {
    expect(() => composeMiddleware([(_c, n) => n(), 'log' as unknown as Mw])).toThrow(
      new TypeError('middleware[1] must be a function, not "log"'),
    );
    expect(() => composeMiddleware({} as unknown as Mw[])).toThrow(
      new TypeError('middleware must be an array of functions, not {}'),
    );
  });
});

/*
 * The property: for any chain of the middleware kinds below around a handler that succeeds or
 * fails (synchronously or not), the reply is what folding the chain from the handler outwards
 * computes, and exactly the middleware up to the first one that answers by itself run.
 */
type Step =
  | { type: 'pass'; async: boolean }
  | { type: 'return-next' }
  | { type: 'short'; value: number; async: boolean }
  | { type: 'throw'; code: number; async: boolean }
  | { type: 'throw-after'; code: number }
  | { type: 'map-error'; code: number }
  | { type: 'recover'; value: number }
  | { type: 'replace'; value: number };

type Outcome = { result: unknown } | { code: number };

const code = fc.integer({ min: -32099, max: -32010 });
const value = fc.integer({ min: 0, max: 1000 });
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ type: fc.constant('pass' as const), async: fc.boolean() }),
  fc.record({ type: fc.constant('return-next' as const) }),
  fc.record({ type: fc.constant('short' as const), value, async: fc.boolean() }),
  fc.record({ type: fc.constant('throw' as const), code, async: fc.boolean() }),
  fc.record({ type: fc.constant('throw-after' as const), code }),
  fc.record({ type: fc.constant('map-error' as const), code }),
  fc.record({ type: fc.constant('recover' as const), value }),
  fc.record({ type: fc.constant('replace' as const), value }),
);
const handlerOutcome: fc.Arbitrary<{ outcome: Outcome; async: boolean }> = fc.record({
  outcome: fc.oneof(
    value.map((v): Outcome => ({ result: v })),
    code.map((c): Outcome => ({ code: c })),
  ),
  async: fc.boolean(),
});

function middlewareFor(s: Step, index: number, ran: number[]): Mw {
  const fail = (c: number) => new ServerError(c, 'm');
  switch (s.type) {
    case 'pass':
      return s.async
        ? async (_c, next) => {
            ran.push(index);
            await next();
          }
        : (_c, next) => {
            ran.push(index);
            void next().catch(() => undefined);
          };
    case 'return-next':
      return (_c, next) => {
        ran.push(index);
        return next();
      };
    case 'short':
      return s.async
        ? async () => {
            ran.push(index);
            await Promise.resolve();
            return s.value;
          }
        : () => {
            ran.push(index);
            return s.value;
          };
    case 'throw':
      return s.async
        ? async () => {
            ran.push(index);
            await Promise.resolve();
            throw fail(s.code);
          }
        : () => {
            ran.push(index);
            throw fail(s.code);
          };
    case 'throw-after':
      return async (_c, next) => {
        ran.push(index);
        await next().catch(() => undefined);
        throw fail(s.code);
      };
    case 'map-error':
      return async (_c, next) => {
        ran.push(index);
        try {
          return await next();
        } catch {
          throw fail(s.code);
        }
      };
    case 'recover':
      return async (_c, next) => {
        ran.push(index);
        try {
          return await next();
        } catch {
          return s.value;
        }
      };
    case 'replace':
      return async (_c, next) => {
        ran.push(index);
        await next().catch(() => undefined);
        return s.value;
      };
  }
}

/** The model: which middleware run, whether the handler does, and the outcome. */
function model(
  steps: Step[],
  handler: Outcome,
): { ran: number[]; handled: boolean; outcome: Outcome } {
  const stop = steps.findIndex((s) => s.type === 'short' || s.type === 'throw');
  const reached = stop === -1 ? steps.length : stop;
  const ran = [...Array(stop === -1 ? steps.length : stop + 1).keys()];
  let outcome: Outcome = handler;
  for (let i = reached; i >= 0; i--) {
    const s = steps[i];
    if (!s) continue;
    if (s.type === 'short') outcome = { result: s.value };
    else if (s.type === 'throw' || s.type === 'throw-after') outcome = { code: s.code };
    else if (s.type === 'map-error' && 'code' in outcome) outcome = { code: s.code };
    else if (s.type === 'recover' && 'code' in outcome) outcome = { result: s.value };
    else if (s.type === 'replace') outcome = { result: s.value };
  }
  return { ran, handled: stop === -1, outcome };
}

describe('middleware chains (property)', () => {
  it('answer what the model computes, running exactly the middleware the model runs', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 6 }), handlerOutcome, async (steps, h) => {
        const ran: number[] = [];
        let handled = false;
        const r = rawWith(steps.map((s, i) => middlewareFor(s, i, ran)));
        r.peer.registry.method('m', () => {
          handled = true;
          const o = h.outcome;
          if (!h.async) {
            if ('code' in o) throw new ServerError(o.code, 'h');
            return o.result;
          }
          return Promise.resolve().then(() => {
            if ('code' in o) throw new ServerError(o.code, 'h');
            return o.result;
          });
        });
        const [reply] = (await r.ask(call('m'), 8)) as {
          result?: unknown;
          error?: { code: number };
        }[];
        const expected = model(steps, h.outcome);
        const got: Outcome = reply!.error ? { code: reply!.error.code } : { result: reply!.result };
        expect(got).toEqual(expected.outcome);
        expect(ran).toEqual(expected.ran);
        expect(handled).toBe(expected.handled);
        r.peer.close();
      }),
      { numRuns: 150 },
    );
  });
});

import { firstValueFrom, map, of, range, toArray } from 'rxjs';
import type { Observable } from 'rxjs';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { demoContract } from '../../demo/contract.js';
import { bindMethods } from '../../src/contract/bind.js';
import { defineContract } from '../../src/contract/contract.js';
import type {
  CallParams,
  CallResult,
  HandlerParams,
  HandlerResult,
  SubscriptionData,
  SubscriptionParams,
} from '../../src/contract/contract.js';
import { useContract } from '../../src/client/contract-client.js';
import type { RpcClient } from '../../src/client/client.js';
import { clientApi, implementContract } from '../../src/server/contract-server.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { Session } from '../../src/server/session.js';
import { Resources } from '../support/resources.js';
import { calc } from './contracts.js';
import { typeErrors } from './type-errors.js';

/*
 * Compile-time checks: `npx tsc --noEmit -p .` is what runs them. Each
 * `@ts-expect-error` line must be a type error; if the types let it through,
 * tsc reports "Unused '@ts-expect-error' directive" on that line. Code inside
 * `compileOnly` closures is never run; the rest also runs, over a real socket,
 * so the types are checked against what actually arrives.
 */

const res = new Resources();
afterEach(() => res.cleanup());

// Only ever used inside `compileOnly` closures, which are never run.
declare const gateway: Gateway;
declare const client: RpcClient;
declare const session: Session;

/** Type-checked, never run: for calls whose only point is the compiler's verdict. */
function compileOnly(body: () => unknown): void {
  expect(typeof body).toBe('function');
}

const shop = defineContract({
  name: 'shop',
  version: '1.0.0',
  methods: {
    subtract: {
      params: z.object({ minuend: z.number(), subtrahend: z.number() }),
      paramOrder: ['minuend', 'subtrahend'],
      result: z.number(),
    },
    /** Input and output types differ: a default and a transform. */
    search: {
      params: z.object({
        query: z.string(),
        limit: z.number().int().default(10),
        page: z.string().transform((s) => Number(s)),
      }),
      result: z.array(z.string()),
    },
    count: { params: z.tuple([z.string()]), result: z.number().int() },
    stats: { result: z.object({ total: z.number() }) },
    /** The handler returns a number, the caller gets the schema's output: a string. */
    format: {
      params: z.object({ n: z.number() }),
      result: z.number().transform((n) => n.toFixed(2)),
    },
  },
  notifications: { progress: { params: z.object({ percent: z.number() }) } },
  clientMethods: {
    'client.confirm': { params: z.object({ question: z.string() }), result: z.boolean() },
  },
  subscriptions: {
    ticker: { data: z.object({ symbol: z.string(), price: z.number() }) },
    countdown: { params: z.object({ from: z.number().int() }), data: z.number() },
  },
});
type Shop = typeof shop;

/** A full, correct implementation of `shop`, with the handlers' params types pinned. */
function implementShop(gateway: Gateway) {
  return implementContract(gateway, shop, {
    methods: {
      subtract: (params) => {
        expectTypeOf(params).toEqualTypeOf<{ minuend: number; subtrahend: number }>();
        return params.minuend - params.subtrahend;
      },
      search: (params) => {
        // The schema's OUTPUT: the default filled in, the transform applied.
        expectTypeOf(params).toEqualTypeOf<{ query: string; limit: number; page: number }>();
        return Array.from({ length: Math.min(params.limit, 2) }, (_, i) => `${params.query}${i}`);
      },
      count: (params) => {
        expectTypeOf(params).toEqualTypeOf<[string]>();
        return params[0].length;
      },
      stats: (params) => {
        expectTypeOf(params).toEqualTypeOf<undefined>();
        return { total: 3 };
      },
      format: ({ n }) => n,
    },
    streams: {
      countdown: (params) => {
        expectTypeOf(params).toEqualTypeOf<{ from: number }>();
        return range(0, params.from + 1).pipe(map((i) => params.from - i));
      },
    },
  });
}

describe('the contract type helpers', () => {
  it('give handlers the output type and callers the input type', () => {
    type Search = Shop['methods']['search'];
    expectTypeOf<HandlerParams<Search>>().toEqualTypeOf<{
      query: string;
      limit: number;
      page: number;
    }>();
    expectTypeOf<CallParams<Search>>().toEqualTypeOf<{
      query: string;
      limit?: number | undefined;
      page: string;
    }>();
    type Format = Shop['methods']['format'];
    expectTypeOf<HandlerResult<Format>>().toEqualTypeOf<number>();
    expectTypeOf<CallResult<Format>>().toEqualTypeOf<string>();
    // paramOrder adds a positional form; without it there is none.
    expectTypeOf<CallParams<Shop['methods']['subtract']>>().toEqualTypeOf<
      { minuend: number; subtrahend: number } | [number, number]
    >();
    expectTypeOf<CallParams<Shop['methods']['count']>>().toEqualTypeOf<[string]>();
    expectTypeOf<CallParams<Shop['methods']['stats']>>().toEqualTypeOf<undefined>();
    expectTypeOf<CallResult<Shop['methods']['stats']>>().toEqualTypeOf<{ total: number }>();

    expect(Object.keys(shop.methods)).toEqual(['subtract', 'search', 'count', 'stats', 'format']);
  });

  it("type the demo's contract from its zod schemas", () => {
    type M = typeof demoContract.methods;
    expectTypeOf<HandlerParams<M['subtract']>>().toEqualTypeOf<{
      minuend: number;
      subtrahend: number;
    }>();
    expectTypeOf<HandlerParams<M['sum']>>().toEqualTypeOf<number[]>();
    expectTypeOf<HandlerParams<M['notify_hello']>>().toEqualTypeOf<[number]>();
    expectTypeOf<HandlerParams<M['get_data']>>().toEqualTypeOf<undefined>();
    expectTypeOf<CallResult<M['get_data']>>().toEqualTypeOf<[string, number]>();
    expectTypeOf<CallParams<M['chat.send']>>().toEqualTypeOf<
      { text: string; from?: string | undefined } | [string] | [string, string]
    >();
    type S = NonNullable<typeof demoContract.subscriptions>;
    expectTypeOf<SubscriptionData<S['ticker']>>().toEqualTypeOf<{
      symbol: string;
      price: number;
      at: number;
    }>();
    expectTypeOf<SubscriptionData<S['countdown']>>().toEqualTypeOf<number>();
    expectTypeOf<HandlerParams<S['countdown']>>().toEqualTypeOf<{ from: number }>();
    expectTypeOf<SubscriptionParams<S['countdown']>>().toEqualTypeOf<
      { from?: number | undefined } | undefined
    >();

    expect(demoContract.methods.subtract.paramOrder).toEqual(['minuend', 'subtrahend']);
  });
});

describe('the server side (implementContract)', () => {
  it('accepts a correct implementation and serves it', async () => {
    const { gateway, url } = await res.gateway();
    const document = implementShop(gateway);
    expect(document.methods.map((m) => m.name)).toEqual([
      'subtract',
      'search',
      'count',
      'stats',
      'format',
    ]);
    const { api } = useContract(res.client(url), shop);
    expect(await api.search({ query: 'q', page: '1' })).toEqual(['q0', 'q1']);
  });

  it('rejects a handler returning the wrong result type', () => {
    compileOnly(() => {
      implementContract(gateway, shop, {
        methods: {
          // @ts-expect-error subtract's result is a number, not a string
          subtract: () => 'nineteen',
          search: () => [],
          count: () => 1,
          stats: () => ({ total: 1 }),
          format: ({ n }) => n,
        },
      });
      implementContract(gateway, shop, {
        methods: {
          subtract: () => 1,
          // @ts-expect-error an async handler must resolve to the result type (string[])
          search: () => Promise.resolve([1, 2]),
          count: () => 1,
          stats: () => ({ total: 1 }),
          format: ({ n }) => n,
        },
      });
      implementContract(gateway, shop, {
        methods: {
          subtract: () => 1,
          search: () => [],
          count: () => 1,
          // @ts-expect-error total must be a number
          stats: () => ({ total: '1' }),
          // @ts-expect-error the handler returns the schema's input (a number), not its output
          format: ({ n }) => n.toFixed(2),
        },
      });
    });
  });

  it('rejects a handler that declares the wrong params type', () => {
    compileOnly(() => {
      implementContract(gateway, shop, {
        methods: {
          // @ts-expect-error the params are { minuend: number; subtrahend: number }
          subtract: (params: { minuend: string }) => params.minuend.length,
          // @ts-expect-error the handler gets the output: page is a number, not a string
          search: (params: { query: string; limit: number; page: string }) => [params.page],
          count: () => 1,
          stats: () => ({ total: 1 }),
          format: ({ n }) => n,
        },
      });
    });
  });

  it('rejects a handler for a method that is not in the contract', () => {
    compileOnly(() => {
      implementContract(gateway, shop, {
        methods: {
          subtract: () => 1,
          search: () => [],
          count: () => 1,
          stats: () => ({ total: 1 }),
          format: ({ n }) => n,
          // @ts-expect-error multiply is not a method of the contract
          multiply: () => 6,
        },
      });
    });
  });

  it('rejects an implementation with a handler missing', () => {
    compileOnly(() => {
      implementContract(gateway, shop, {
        // @ts-expect-error format has no handler
        methods: {
          subtract: () => 1,
          search: () => [],
          count: () => 1,
          stats: () => ({ total: 1 }),
        },
      });
    });
  });

  it('types streams by the subscription params and data schemas', () => {
    compileOnly(() => {
      const methods = {
        subtract: () => 1,
        search: () => [],
        count: () => 1,
        stats: () => ({ total: 1 }),
        format: ({ n }: { n: number }) => n,
      };
      implementContract(gateway, shop, {
        methods,
        // @ts-expect-error countdown's messages are numbers
        streams: { countdown: () => of('ten') },
      });
      implementContract(gateway, shop, {
        methods,
        // @ts-expect-error nope is not a subscription of the contract
        streams: { nope: () => of(1) },
      });
      implementContract(gateway, shop, {
        methods,
        streams: {
          // @ts-expect-error from is a number
          countdown: (params: { from: string }) => of(params.from.length),
        },
      });
    });
  });
});

describe('the client side (useContract)', () => {
  it('types api calls by the schemas, and they work by name and by position', async () => {
    const { gateway, url } = await res.gateway();
    implementShop(gateway);
    const { api } = useContract(res.client(url), shop);

    const byName = api.subtract({ minuend: 42, subtrahend: 23 });
    expectTypeOf(byName).toEqualTypeOf<Promise<number>>();
    expect(await byName).toBe(19);
    expect(await api.subtract([42, 23])).toBe(19);

    const counted = api.count(['four']);
    expectTypeOf(counted).toEqualTypeOf<Promise<number>>();
    expect(await counted).toBe(4);

    const stats = api.stats(undefined);
    expectTypeOf(stats).toEqualTypeOf<Promise<{ total: number }>>();
    expect(await stats).toEqual({ total: 3 });

    // The caller sends the input type: limit may be left out, page is a string.
    const found = api.search({ query: 'x', page: '3' });
    expectTypeOf(found).toEqualTypeOf<Promise<string[]>>();
    expect(await found).toEqual(['x0', 'x1']);
    expectTypeOf(api.format).returns.toEqualTypeOf<Promise<string>>();
  });

  it('rejects wrong params at compile time', () => {
    compileOnly(() => {
      const { api } = useContract(client, shop);
      // @ts-expect-error minuend is a number
      void api.subtract({ minuend: '42', subtrahend: 23 });
      // @ts-expect-error subtrahend is missing
      void api.subtract({ minuend: 42 });
      // @ts-expect-error the params are required
      void api.subtract(undefined);
      // @ts-expect-error search has no paramOrder, so no positional form
      void api.search(['x', 10, '1']);
      // @ts-expect-error page is sent as a string (the schema's input)
      void api.search({ query: 'x', page: 3 });
      // @ts-expect-error count takes a one-string tuple
      void api.count([4]);
      // @ts-expect-error count is positional only
      void api.count({ 0: 'four' });
      // @ts-expect-error stats takes no params
      void api.stats({ all: true });
      // @ts-expect-error multiply is not a method of the contract
      void api.multiply({ a: 1, b: 2 });
    });
  });

  it('rejects using a result as the wrong type', () => {
    compileOnly(async () => {
      const { api } = useContract(client, shop);
      // @ts-expect-error subtract resolves to a number
      const s: string = await api.subtract([1, 2]);
      // @ts-expect-error format resolves to the schema's output, a string
      const n: number = await api.format({ n: 1 });
      void [s, n];
    });
  });

  it('types subscribe and notifications by their schemas and rejects unknown names', async () => {
    const { gateway, url } = await res.gateway();
    implementShop(gateway);
    const sessionOpened = firstValueFrom(gateway.connected$);
    const bound = useContract(res.client(url), shop);

    expectTypeOf(bound.subscribe('ticker')).toEqualTypeOf<
      Observable<{ symbol: string; price: number }>
    >();
    const countdown = bound.subscribe('countdown', { from: 2 });
    expectTypeOf(countdown).toEqualTypeOf<Observable<number>>();
    expect(await firstValueFrom(countdown.pipe(toArray()))).toEqual([2, 1, 0]);

    const progress = bound.notifications('progress');
    expectTypeOf(progress).toEqualTypeOf<Observable<{ percent: number }>>();
    const first = firstValueFrom(progress);
    (await sessionOpened).notify('progress', { percent: 50 });
    expect(await first).toEqual({ percent: 50 });

    compileOnly(() => {
      // @ts-expect-error nope is not a subscription of the contract
      bound.subscribe('nope');
      // @ts-expect-error from is a number
      bound.subscribe('countdown', { from: 'ten' });
      // @ts-expect-error nope is not a notification of the contract
      bound.notifications('nope');
    });
  });

  it("types the client's own handlers, validated against the contract", async () => {
    const { gateway, url } = await res.gateway();
    implementShop(gateway);
    const sessionOpened = firstValueFrom(gateway.connected$);
    const client = res.client(url);
    useContract(client, shop, {
      'client.confirm': (params) => {
        expectTypeOf(params).toEqualTypeOf<{ question: string }>();
        return params.question.endsWith('?');
      },
    });
    const session = await sessionOpened;
    const confirmed = clientApi(session, shop)['client.confirm']({ question: 'ok?' });
    expectTypeOf(confirmed).toEqualTypeOf<Promise<boolean>>();
    expect(await confirmed).toBe(true);

    compileOnly(() => {
      // @ts-expect-error the answer must be a boolean
      useContract(client, shop, { 'client.confirm': () => 'yes' });
      // @ts-expect-error client.greet is not a client method of the contract
      useContract(client, shop, { 'client.confirm': () => true, 'client.greet': () => 'hi' });
    });
  });
});

describe('server-to-client calls (clientApi)', () => {
  it('are typed by the contract', () => {
    compileOnly(() => {
      const confirm = clientApi(session, shop)['client.confirm'];
      expectTypeOf(confirm).parameter(0).toEqualTypeOf<{ question: string }>();
      expectTypeOf(confirm).returns.toEqualTypeOf<Promise<boolean>>();
      // The demo's answer schema is z.unknown().
      expectTypeOf(clientApi(session, demoContract)['client.confirm'])
        .parameter(0)
        .toEqualTypeOf<{ question: string }>();
      expectTypeOf(clientApi(session, demoContract)['client.confirm']).returns.toEqualTypeOf<
        Promise<unknown>
      >();
      // @ts-expect-error question is a string
      void confirm({ question: 42 });
      // @ts-expect-error subtract is a server method, not a client method
      void clientApi(session, shop).subtract({ minuend: 1, subtrahend: 2 });
    });
  });

  it('send what the proxy is given, under the method name', async () => {
    const calls: unknown[][] = [];
    const api = bindMethods(
      {
        call: (method, params) => {
          calls.push([method, params]);
          // Results are parsed with the contract's result schemas: answer with valid ones.
          return Promise.resolve(method === 'stats' ? { total: 1 } : 1);
        },
      },
      shop.methods,
    );
    await api.subtract([42, 23]);
    await api.stats(undefined);
    expect(calls).toEqual([
      ['subtract', [42, 23]],
      ['stats', undefined],
    ]);
  });
});

/*
 * Gaps the compiler does not catch. These snippets cannot be `@ts-expect-error`
 * lines (an unused directive would fail `tsc -p .` for the whole project), so
 * each is type-checked on its own with the project's compiler options, and the
 * test asserts the error the contract's types should have produced.
 */
const snippetHead = `
import { z } from 'zod';
import { defineContract } from '../../src/contract/contract.js';
import { useContract } from '../../src/client/contract-client.js';
import type { RpcClient } from '../../src/client/client.js';
const c = defineContract({
  name: 'c',
  version: '1',
  methods: {
    subtract: {
      params: z.object({ minuend: z.number(), subtrahend: z.number() }),
      paramOrder: ['minuend', 'subtrahend'],
      result: z.number(),
    },
  },
});
declare const client: RpcClient;
const { api } = useContract(client, c);
`;
const headLines = snippetHead.split('\n').length;

// Each check builds a TypeScript program: seconds, not milliseconds.
describe('positional params (paramOrder) at compile time', { timeout: 60_000 }, () => {
  it('the checker itself: a correct call passes, a wrong named one fails on its line', () => {
    expect(typeErrors(`${snippetHead}void api.subtract([42, 23]);\n`)).toEqual([]);
    const errors = typeErrors(
      `${snippetHead}void api.subtract({ minuend: '42', subtrahend: 23 });\n`,
    );
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(new RegExp(`^${headLines}: `));
  });

  it('rejects positional params of the wrong types', () => {
    const errors = typeErrors(`${snippetHead}void api.subtract(['42', '23']);\n`);
    expect(errors, 'api.subtract(["42", "23"]) compiled').not.toEqual([]);
  });

  it('rejects more positional params than paramOrder names', () => {
    const errors = typeErrors(`${snippetHead}void api.subtract([1, 2, 3]);\n`);
    expect(errors, 'api.subtract([1, 2, 3]) compiled').not.toEqual([]);
  });
});

describe('subscribe params at compile time', () => {
  it('are required when the stream has required params, optional when it has none', () => {
    compileOnly(() => {
      const bound = useContract({} as RpcClient, calc);
      // @ts-expect-error count needs { upTo }
      bound.subscribe('count');
      bound.subscribe('count', { upTo: 3 });
      const demo = useContract({} as RpcClient, demoContract);
      demo.subscribe('ticker');
      demo.subscribe('countdown'); // its params have a default
    });
    expect(typeof useContract).toBe('function');
  });
});

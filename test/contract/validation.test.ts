import { firstValueFrom, of, toArray } from 'rxjs';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { useContract } from '../../src/client/contract-client.js';
import { defineContract } from '../../src/contract/contract.js';
import { InvalidParamsError } from '../../src/protocol/errors.js';
import type { JsonRpcError } from '../../src/protocol/errors.js';
import { clientApi, implementContract } from '../../src/server/contract-server.js';
import type { Gateway } from '../../src/server/gateway.js';
import { Resources } from '../support/resources.js';
import { rejectionOf } from '../support/promises.js';
import { RawRpc } from '../support/raw-rpc.js';
import { calc, implementCalc } from './contracts.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** Any non-empty message: its wording belongs to the schema library. */
const message = expect.stringMatching(/\S/);

/** The exact -32602 error object contract validation answers with. */
function invalidParams(...paths: (string | number)[][]) {
  return {
    code: -32602,
    message: 'Invalid params',
    data: { issues: paths.map((path) => ({ path, message })) },
  };
}

async function calcGateway(options: Parameters<typeof implementCalc>[1] = {}) {
  const running = await res.gateway();
  const { seen } = implementCalc(running.gateway, options);
  return { ...running, seen };
}

async function raw(url: string): Promise<RawRpc> {
  const rpc = await RawRpc.open(url);
  res.track(rpc.socket);
  return rpc;
}

describe('invalid params', () => {
  it('are answered -32602 with data { issues: [{ path, message }] } and never reach the handler', async () => {
    const { url, seen } = await calcGateway();
    const rpc = await raw(url);

    // A nested object member and an array element, both wrong: one issue each, in order.
    const nested = await rpc.request('place', {
      name: 'home',
      at: { x: 'one', y: 2 },
      tags: ['a', 2],
    });
    expect(nested.error).toStrictEqual(invalidParams(['at', 'x'], ['tags', 1]));

    // A missing member, nested and at the top level.
    const missingNested = await rpc.request('place', { name: 'home', at: { x: 1 }, tags: [] });
    expect(missingNested.error).toStrictEqual(invalidParams(['at', 'y']));
    const missingTop = await rpc.request('subtract', { minuend: 42 });
    expect(missingTop.error).toStrictEqual(invalidParams(['subtrahend']));

    // A wrong type at the top level: a member, and the params themselves.
    const wrongMember = await rpc.request('subtract', { minuend: '42', subtrahend: 23 });
    expect(wrongMember.error).toStrictEqual(invalidParams(['minuend']));
    const noParams = await rpc.request('configure');
    expect(noParams.error).toStrictEqual(invalidParams([]));

    // Positional params are mapped first, so the issue names the member, not the index.
    const positional = await rpc.request('subtract', [42, 'x']);
    expect(positional.error).toStrictEqual(invalidParams(['subtrahend']));

    expect(seen).toEqual([]);
  });

  it('carry the issue text the schema produced (zod 4 here)', async () => {
    const { url } = await calcGateway();
    const rpc = await raw(url);
    const reply = await rpc.request('subtract', { minuend: '42', subtrahend: 23 });
    expect(reply.error?.data).toStrictEqual({
      issues: [{ path: ['minuend'], message: 'Invalid input: expected number, received string' }],
    });
  });
});

describe('a method without a params schema', () => {
  it('takes none: absent, [] or {} reach the handler as undefined, anything else is -32602', async () => {
    const { url, seen } = await calcGateway();
    const rpc = await raw(url);
    const none = {
      code: -32602,
      message: 'Invalid params',
      data: { issues: [{ path: [], message: 'Expected no params' }] },
    };
    expect((await rpc.request('now', { evil: 1 })).error).toStrictEqual(none);
    expect((await rpc.request('now', [1, 2])).error).toStrictEqual(none);
    expect(seen).toEqual([]);
    for (const params of [undefined, [], {}]) {
      expect((await rpc.request('now', params)).result).toBe(1_700_000_000_000);
    }
    expect(seen).toStrictEqual([
      { method: 'now', params: undefined },
      { method: 'now', params: undefined },
      { method: 'now', params: undefined },
    ]);
  });
});

describe('positional and named params', () => {
  it('reach the handler as the same object (paramOrder)', async () => {
    const { url, seen } = await calcGateway();
    const rpc = await raw(url);

    expect((await rpc.request('subtract', [42, 23])).result).toBe(19);
    expect((await rpc.request('subtract', { minuend: 42, subtrahend: 23 })).result).toBe(19);
    // paramOrder is not the declaration order here: [at, name, tags, note].
    const byPosition = await rpc.request('place', [{ x: 1, y: 2 }, 'home', ['a'], 'front']);
    const byName = await rpc.request('place', {
      tags: ['a'],
      note: 'front',
      name: 'home',
      at: { x: 1, y: 2 },
    });
    expect(byPosition.result).toBe('home@1,2');
    expect(byName.result).toBe('home@1,2');
    // Trailing optional members may be left out by position.
    expect((await rpc.request('place', [{ x: 3, y: 4 }, 'work', []])).result).toBe('work@3,4');

    expect(seen).toStrictEqual([
      { method: 'subtract', params: { minuend: 42, subtrahend: 23 } },
      { method: 'subtract', params: { minuend: 42, subtrahend: 23 } },
      {
        method: 'place',
        params: { name: 'home', at: { x: 1, y: 2 }, tags: ['a'], note: 'front' },
      },
      {
        method: 'place',
        params: { name: 'home', at: { x: 1, y: 2 }, tags: ['a'], note: 'front' },
      },
      { method: 'place', params: { name: 'work', at: { x: 3, y: 4 }, tags: [] } },
    ]);
  });

  it('more positional params than paramOrder names are -32602', async () => {
    const { url, seen } = await calcGateway();
    const rpc = await raw(url);
    const reply = await rpc.request('subtract', [42, 23, 1]);
    expect(reply.error).toStrictEqual({
      code: -32602,
      message: 'Invalid params',
      data: {
        issues: [{ path: [], message: 'Expected at most 2 positional params, got 3' }],
      },
    });
    expect(seen).toEqual([]);
  });

  it('an object schema without paramOrder takes its params by name only', async () => {
    const { url, seen } = await calcGateway();
    const rpc = await raw(url);
    expect((await rpc.request('configure', ['high', 5])).error).toStrictEqual(invalidParams([]));
    // The handler gets the schema's output: the default filled in.
    expect((await rpc.request('configure', { level: 'high' })).result).toStrictEqual({
      level: 'high',
      retries: 3,
    });
    expect(seen).toStrictEqual([{ method: 'configure', params: { level: 'high', retries: 3 } }]);
  });

  it('a tuple schema takes its params by position only', async () => {
    const { url, seen } = await calcGateway();
    const rpc = await raw(url);
    expect((await rpc.request('pair', ['ab', 2])).result).toBe('abab');
    expect((await rpc.request('pair', { 0: 'ab', 1: 2 })).error).toStrictEqual(invalidParams([]));
    expect((await rpc.request('pair', ['ab', 'two'])).error).toStrictEqual(invalidParams([1]));
    expect(seen).toStrictEqual([{ method: 'pair', params: ['ab', 2] }]);
  });
});

describe('validateResults', () => {
  it('true: a result that breaks the contract is -32603 with data.method and the issues', async () => {
    const { url } = await calcGateway({ validateResults: true });
    const rpc = await raw(url);
    const internal = {
      code: -32603,
      message: 'Result does not match the contract',
      data: { method: 'broken', issues: [{ path: [], message }] },
    };
    expect((await rpc.request('broken', { kind: 'sync' })).error).toStrictEqual(internal);
    expect((await rpc.request('broken', { kind: 'async' })).error).toStrictEqual(internal);
    // Results that match still go through.
    expect((await rpc.request('subtract', [5, 3])).result).toBe(2);
  });

  it("true: checks the result but sends the handler's value, not the schema's output", async () => {
    const formatting = defineContract({
      name: 'formatting',
      version: '1.0.0',
      methods: {
        format: {
          params: z.object({ n: z.number() }),
          result: z.number().transform((n) => n.toFixed(2)),
        },
        profile: { result: z.object({ name: z.string() }) },
      },
    });
    const { gateway, url } = await res.gateway();
    implementContract(
      gateway,
      formatting,
      {
        methods: {
          format: ({ n }) => n,
          profile: () => ({ name: 'ada', extra: 1 }) as { name: string },
        },
      },
      { validateResults: true },
    );
    const rpc = await raw(url);
    // On the wire: the handler's value (the schema's input), extra members and all.
    expect((await rpc.request('format', { n: 1 })).result).toBe(1);
    expect((await rpc.request('profile')).result).toStrictEqual({ name: 'ada', extra: 1 });
    // The typed client parses it once: the output its type says.
    const { api } = useContract(res.client(url), formatting);
    expect(await api.format({ n: 1 })).toBe('1.00');
    expect(await api.profile()).toStrictEqual({ name: 'ada' });
  });

  it('false (the default): the result goes out as the handler returned it', async () => {
    for (const options of [{}, { validateResults: false }]) {
      const { url } = await calcGateway(options);
      const rpc = await raw(url);
      expect((await rpc.request('broken', { kind: 'sync' })).result).toBe('not a number');
      expect((await rpc.request('broken', { kind: 'async' })).result).toBe('not a number');
    }
  });

  it('true: the caller gets the result schema output the contract types it as', async () => {
    const { url } = await calcGateway({ validateResults: true });
    const { api } = useContract(res.client(url), calc);
    const tally = await api.tally(undefined);
    expectTypeOf(tally).toEqualTypeOf<{ count: number }>();
    expect(tally).toStrictEqual({ count: 0 });
  });

  it('false: the caller still gets what its type says (the result schema output)', async () => {
    const { url } = await calcGateway();
    const { api } = useContract(res.client(url), calc);
    const tally = await api.tally(undefined);
    expectTypeOf(tally.count).toEqualTypeOf<number>();
    expect(tally, 'typed { count: number }').toStrictEqual({ count: 0 });
  });
});

describe('streams', () => {
  it('validate their params: -32602 on the subscribe reply, nothing pushed, no source made', async () => {
    const { url, seen } = await calcGateway();
    const rpc = await raw(url);

    const tooLow = await rpc.request('subscribe', ['count', { upTo: 0 }]);
    expect(tooLow.error).toStrictEqual(invalidParams(['upTo']));
    const missing = await rpc.request('subscribe', ['count']);
    expect(missing.error).toStrictEqual(invalidParams([]));
    const nested = await rpc.request('subscribe', {
      topic: 'count',
      params: { upTo: 2, label: 7 },
    });
    expect(nested.error).toStrictEqual(invalidParams(['label']));
    await rpc.barrier();
    expect(rpc.notifications()).toEqual([]);
    expect(seen).toEqual([]);

    // Valid params: the stream runs with the validated object.
    const ok = await rpc.request('subscribe', ['count', { upTo: 3 }]);
    const id = ok.result as string;
    expect(typeof id).toBe('string');
    await rpc.until(() => rpc.notifications(id).some((n) => n.complete), 'the stream to end');
    expect(rpc.notifications(id).map((n) => n.result ?? 'end')).toEqual([1, 2, 3, 'end']);
    expect(seen).toStrictEqual([{ method: 'count', params: { upTo: 3 } }]);
  });

  it('take params documented as one member named "params" in that form, as methods do', async () => {
    const summing = defineContract({
      name: 'summing',
      version: '1.0.0',
      methods: {},
      subscriptions: { total: { params: z.array(z.number()), data: z.number() } },
    });
    const { gateway, url } = await res.gateway();
    const document = implementContract(gateway, summing, {
      methods: {},
      streams: { total: (numbers) => of(numbers.reduce((a, b) => a + b, 0)) },
    });
    expect(document['x-subscriptions'].subscriptions[0]!.params.map((p) => p.name)).toEqual([
      'params',
    ]);
    const rpc = await raw(url);
    for (const params of [{ params: [1, 2, 3] }, [1, 2, 3]]) {
      const reply = await rpc.request('subscribe', ['total', params]);
      expect(reply.error).toBeUndefined();
      const id = reply.result as string;
      await rpc.until(() => rpc.notifications(id).some((n) => n.complete), 'the stream to end');
      expect(rpc.notifications(id).map((n) => n.result ?? 'end')).toEqual([6, 'end']);
    }
  });

  it('with an async params schema, reject before anything is pushed as well', async () => {
    const { url, seen } = await calcGateway();
    const rpc = await raw(url);
    const rejected = await rpc.request('subscribe', ['slowCount', { upTo: 0 }]);
    expect(rejected.error).toStrictEqual({
      code: -32602,
      message: 'Invalid params',
      data: { issues: [{ path: ['upTo'], message: 'Must be at least 1' }] },
    });
    await rpc.barrier();
    expect(rpc.notifications()).toEqual([]);
    expect(seen).toEqual([]);

    const bound = useContract(res.client(url), calc);
    const slow = bound.subscribe('slowCount', { upTo: 4 });
    expect(await firstValueFrom(slow.pipe(toArray()))).toEqual([4]);
    const error = await rejectionOf(firstValueFrom(bound.subscribe('count', { upTo: 1_000 })));
    expect(error).toBeInstanceOf(InvalidParamsError);
    expect((error as JsonRpcError).data).toStrictEqual({ issues: [{ path: ['upTo'], message }] });
  });
});

describe('async schemas', () => {
  it('validate methods too: the refinement runs before the handler', async () => {
    const { url, seen } = await calcGateway();
    const rpc = await raw(url);
    expect((await rpc.request('register', { name: 'admin' })).error).toStrictEqual({
      code: -32602,
      message: 'Invalid params',
      data: { issues: [{ path: ['name'], message: 'Name is taken' }] },
    });
    expect((await rpc.request('register', ['root'])).error).toStrictEqual({
      code: -32602,
      message: 'Invalid params',
      data: { issues: [{ path: ['name'], message: 'Name is taken' }] },
    });
    expect((await rpc.request('register', ['alice'])).result).toStrictEqual({ name: 'alice' });
    expect((await rpc.request('register', { name: 'bob' })).result).toStrictEqual({ name: 'bob' });
    expect(seen).toStrictEqual([
      { method: 'register', params: { name: 'alice' } },
      { method: 'register', params: { name: 'bob' } },
    ]);
  });
});

describe("the client's methods (useContract)", () => {
  async function clientWithSession() {
    const { gateway, url } = await calcGateway();
    const sessionOpened = firstValueFrom(gateway.connected$);
    const client = res.client(url);
    const asked: unknown[] = [];
    useContract(client, calc, {
      'client.confirm': (params) => {
        asked.push(params);
        return params.question.endsWith('?');
      },
    });
    const session = await sessionOpened;
    return { client, session, asked };
  }

  it('get validated params, by name or by position (paramOrder)', async () => {
    const { session, asked } = await clientWithSession();
    const confirm = clientApi(session, calc)['client.confirm'];
    expect(await confirm({ question: 'Proceed?' })).toBe(true);
    expect(await confirm(['Stop.'])).toBe(false);
    expect(asked).toStrictEqual([{ question: 'Proceed?' }, { question: 'Stop.' }]);
  });

  it('answer a server call with bad params -32602, without running the handler', async () => {
    const { session, asked } = await clientWithSession();
    const confirm = clientApi(session, calc)['client.confirm'];
    const wrongType = await rejectionOf(confirm({ question: 42 } as never));
    expect(wrongType).toBeInstanceOf(InvalidParamsError);
    expect((wrongType as JsonRpcError).code).toBe(-32602);
    expect((wrongType as JsonRpcError).data).toStrictEqual({
      issues: [{ path: ['question'], message }],
    });
    const empty = await rejectionOf(confirm(['']));
    expect((empty as JsonRpcError).data).toStrictEqual({
      issues: [{ path: ['question'], message }],
    });
    const tooMany = await rejectionOf(confirm(['a?', 'b?'] as never));
    expect((tooMany as JsonRpcError).data).toStrictEqual({
      issues: [{ path: [], message: 'Expected at most 1 positional params, got 2' }],
    });
    // The same on the wire, sent by hand through the session.
    const byHand = await rejectionOf(session.call('client.confirm', {}));
    expect((byHand as JsonRpcError).toErrorObject()).toStrictEqual(invalidParams(['question']));
    expect(asked).toEqual([]);
  });

  it('must all be methods of the contract', async () => {
    const { url } = await calcGateway();
    const client = res.client(url);
    expect(() => useContract(client, calc, { 'client.nope': () => true } as never)).toThrow(
      '"client.nope" is not a client method of the contract',
    );
  });

  it('must be functions: one given as anything else is refused, and none is registered', async () => {
    const { url } = await calcGateway();
    const client = res.client(url);
    expect(() => useContract(client, calc, { 'client.confirm': 'yes' } as never)).toThrow(
      new TypeError('clientMethods["client.confirm"] must be a function, not "yes"'),
    );
    expect(() => useContract(client, calc, 'handlers' as never)).toThrow(
      new TypeError('clientMethods must be an object of handlers, not "handlers"'),
    );
    // Nothing was registered by the refused calls: the handler can still be given.
    expect(() => useContract(client, calc, { 'client.confirm': () => true })).not.toThrow();
  });
});

describe('paramOrder', () => {
  it('naming a member the params schema does not have is a compile error and throws', async () => {
    const params = z.object({ minuend: z.number(), subtrahend: z.number() });
    expect(() =>
      defineContract({
        name: 'typo',
        version: '1.0.0',
        methods: {
          subtract: {
            params,
            // @ts-expect-error minuendd is not a member of the params
            paramOrder: ['minuendd', 'subtrahend'],
            result: z.number(),
          },
        },
      }),
    ).toThrow(
      'The paramOrder of method "subtract" names "minuendd", not a member of its params ("minuend", "subtrahend")',
    );
    // A contract not made by defineContract is checked when it is implemented.
    const { gateway } = await res.gateway();
    const contract = {
      name: 'typo',
      version: '1.0.0',
      methods: {},
      notifications: {
        progress: { params: z.object({ percent: z.number() }), paramOrder: ['pct'] },
      },
    };
    expect(() => implementContract(gateway, contract, { methods: {} })).toThrow(
      'The paramOrder of notification "progress" names "pct", not a member of its params ("percent")',
    );
  });
});

describe('paramOrder that positional calls could not go by', () => {
  const contractWith = (spec: object) => ({
    name: 'order',
    version: '1.0.0',
    methods: { f: spec },
  });

  it('throws on a name listed twice, a required member left out, or no params schema', () => {
    const params = z.object({ a: z.number(), b: z.number(), c: z.number().optional() });
    expect(() =>
      defineContract(contractWith({ params, paramOrder: ['a', 'a', 'b', 'c'] })),
    ).toThrow('The paramOrder of method "f" lists "a" more than once');
    expect(() => defineContract(contractWith({ params, paramOrder: ['a', 'c'] }))).toThrow(
      'The paramOrder of method "f" leaves out required "b": no call by position could give it',
    );
    expect(() => defineContract(contractWith({ paramOrder: ['a'] }))).toThrow(
      'The paramOrder of method "f" has no params schema to map positions onto',
    );
    // An optional member left out is given by name only.
    expect(() => defineContract(contractWith({ params, paramOrder: ['a', 'b'] }))).not.toThrow();
  });

  it('takes optional members anywhere, and schemas it cannot list the members of on trust', () => {
    for (const params of [
      z.object({ a: z.number().default(1), b: z.number() }),
      z.object({ a: z.number().nullable().optional(), b: z.number() }),
      z.union([z.object({ a: z.number(), b: z.number() }), z.object({ a: z.string() })]),
      z.object({ a: z.number(), b: z.number() }).nullable(),
      z.record(z.string(), z.number()),
    ]) {
      expect(() => defineContract(contractWith({ params, paramOrder: ['a', 'b'] }))).not.toThrow();
    }
  });

  it('positional calls: trailing optional members may be left out; a position given is a value', async () => {
    const trailing = defineContract({
      name: 'order',
      version: '1.0.0',
      methods: {
        f: {
          params: z.object({ a: z.number(), b: z.number().optional(), c: z.number().default(7) }),
          paramOrder: ['a', 'b', 'c'],
          result: z.array(z.unknown()),
        },
      },
    });
    const { gateway, url } = await res.gateway();
    implementContract(gateway, trailing, { methods: { f: ({ a, b, c }) => [a, b ?? null, c] } });
    const { api } = useContract(res.client(url), trailing);
    expect(await api.f([1])).toEqual([1, null, 7]);
    expect(await api.f([1, 2])).toEqual([1, 2, 7]);
    expect(await api.f([1, 2, 3])).toEqual([1, 2, 3]);
    expect(await api.f({ a: 1, c: 3 })).toEqual([1, null, 3]);
    // @ts-expect-error a position given is a value: undefined would go as null, which b refuses
    await expect(api.f([1, undefined, 3])).rejects.toMatchObject({ code: -32602 });
  });

  it('on a tuple schema is a compile error and throws', () => {
    expect(() =>
      defineContract({
        name: 'order',
        version: '1.0.0',
        methods: {
          f: {
            params: z.tuple([z.number(), z.number()]),
            // @ts-expect-error a tuple is positional already: no member names
            paramOrder: ['x', 'y'],
          },
        },
      }),
    ).toThrow(
      'The paramOrder of method "f" is on a tuple params schema, which is positional already',
    );
  });
});

describe('implementContract', () => {
  it('refuses a contract method without a handler', async () => {
    const { gateway } = await res.gateway();
    expect(() =>
      implementContract(gateway as Gateway, calc, { methods: { subtract: () => 1 } } as never),
    ).toThrow('The contract\'s method "place" has no handler');
  });
});

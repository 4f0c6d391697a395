import { firstValueFrom, take, toArray } from 'rxjs';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { useContract } from '../../src/client/contract-client.js';
import { defineContract } from '../../src/contract/contract.js';
import type { CallResult, HandlerParams, HandlerResult } from '../../src/contract/contract.js';
import { findNonJson } from '../../src/contract/json-value.js';
import type { JsonRpcError } from '../../src/protocol/errors.js';
import { contractEvents, implementContract } from '../../src/server/contract-server.js';
import { captureLogger } from '../support/logging.js';
import { rejectionOf } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';
import { typeErrors } from './type-errors.js';

/*
 * Contracts are JSON-only: the schemas' input types (what goes over the wire) may not hold a
 * Date, bigint, Map, Set, function, symbol, binary data or a class instance; output types
 * may (a transform runs after the JSON is read). In debug mode (`validateResults`) the
 * server also checks, at run time, that what it sends is JSON as it stands.
 */

const res = new Resources();
afterEach(() => res.cleanup());

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
  length(): number {
    return Math.hypot(this.x, this.y);
  }
}

/** Type-checked, never run: for definitions whose only point is the compiler's verdict. */
function compileOnly(body: () => unknown): void {
  expect(typeof body).toBe('function');
}

describe('a contract with a non-JSON input type does not compile', () => {
  it('wherever the schema is: params, results, notifications, client methods, subscriptions', () => {
    compileOnly(() => [
      defineContract({
        name: 'c',
        version: '1',
        // @ts-expect-error the result holds a Date
        methods: { getUser: { result: z.object({ createdAt: z.date() }) } },
      }),
      defineContract({
        name: 'c',
        version: '1',
        // @ts-expect-error the params hold a bigint
        methods: { transfer: { params: z.object({ amount: z.bigint() }) } },
      }),
      defineContract({
        name: 'c',
        version: '1',
        methods: {},
        // @ts-expect-error the notification's params hold a Map
        notifications: { scores: { params: z.object({ byName: z.map(z.string(), z.number()) }) } },
      }),
      defineContract({
        name: 'c',
        version: '1',
        methods: {},
        // @ts-expect-error the client method's result is a Set
        clientMethods: { pick: { result: z.set(z.string()) } },
      }),
      defineContract({
        name: 'c',
        version: '1',
        methods: {},
        // @ts-expect-error a topic's data holds a Date in an array
        subscriptions: { 'room.*': { data: z.object({ seen: z.array(z.date()) }) } },
      }),
      defineContract({
        name: 'c',
        version: '1',
        methods: {},
        // @ts-expect-error a stream's params hold a function
        subscriptions: { ticks: { params: z.object({ onTick: z.function() }), data: z.number() } },
      }),
      defineContract({
        name: 'c',
        version: '1',
        // @ts-expect-error a class instance (its methods are not JSON)
        methods: { where: { result: z.instanceof(Point) } },
      }),
      defineContract({
        name: 'c',
        version: '1',
        // @ts-expect-error binary data, in a record
        methods: { files: { result: z.record(z.string(), z.instanceof(Uint8Array)) } },
      }),
    ]);
  });

  it('names the member, the type and the JSON way to carry it', { timeout: 60_000 }, () => {
    const errors = typeErrors(`
import { z } from 'zod';
import { defineContract } from '../../src/contract/contract.js';
export const c = defineContract({
  name: 'users',
  version: '1',
  methods: {
    getUser: { result: z.object({ name: z.string(), createdAt: z.date() }) },
    transfer: { params: z.tuple([z.string(), z.bigint()]) },
  },
  subscriptions: { 'scores.*': { data: z.record(z.string(), z.map(z.string(), z.number())) } },
});
`);
    expect(errors).toHaveLength(3);
    expect(errors[0]).toContain(
      '"result of getUser: Date at .createdAt is not JSON; use z.iso.datetime() (an ISO 8601 string)"',
    );
    expect(errors[1]).toContain(
      '"params of transfer: bigint at [i] is not JSON; use a decimal string"',
    );
    expect(errors[2]).toContain(
      '"data of scores.*: Map at [key] is not JSON; use z.record() or an array of [key, value] pairs"',
    );
  });
});

/** Dates, big integers and maps as JSON carries them: the documented way. */
const ledger = defineContract({
  name: 'ledger',
  version: '1.0.0',
  methods: {
    entry: {
      params: z.object({
        // Sent as an ISO string, read as a Date by the handler.
        since: z.iso.datetime().transform((s) => new Date(s)),
      }),
      result: z.object({
        at: z.iso.datetime(),
        // A decimal string: exact past 2^53, and BigInt(amount) where arithmetic needs it.
        amount: z.string().regex(/^-?\d+$/),
        // A map as a record...
        balances: z.record(z.string(), z.number()),
        // ...or, where keys are not strings or order matters, as [key, value] pairs.
        ranks: z.array(z.tuple([z.number(), z.string()])),
      }),
    },
    /** Output types are free: the caller gets a Date from the ISO string sent. */
    lastSeen: { result: z.iso.datetime().transform((s) => new Date(s)) },
  },
});

describe('dates, big integers and maps, the JSON way', () => {
  it('compile, go over the wire, and arrive as the schemas make them', async () => {
    type Entry = (typeof ledger)['methods']['entry'];
    expectTypeOf<HandlerParams<Entry>>().toEqualTypeOf<{ since: Date }>();
    expectTypeOf<HandlerResult<(typeof ledger)['methods']['lastSeen']>>().toEqualTypeOf<string>();
    expectTypeOf<CallResult<(typeof ledger)['methods']['lastSeen']>>().toEqualTypeOf<Date>();

    const { gateway, url } = await res.gateway();
    const seen: Date[] = [];
    implementContract(
      gateway,
      ledger,
      {
        methods: {
          entry: ({ since }) => {
            seen.push(since);
            const balances = new Map([['alice', 10]]);
            return {
              at: new Date(since.getTime() + 1000).toISOString(),
              amount: (2n ** 64n).toString(),
              balances: Object.fromEntries(balances),
              ranks: [...new Map([[1, 'alice']])],
            };
          },
          lastSeen: () => '2024-05-01T12:00:00.000Z',
        },
      },
      { validateResults: true },
    );
    const { api } = useContract(res.client(url), ledger);
    const entry = await api.entry({ since: '2024-05-01T12:00:00.000Z' });
    expect(seen).toEqual([new Date('2024-05-01T12:00:00.000Z')]);
    expect(entry).toEqual({
      at: '2024-05-01T12:00:01.000Z',
      amount: '18446744073709551616',
      balances: { alice: 10 },
      ranks: [[1, 'alice']],
    });
    expect(BigInt(entry.amount)).toBe(2n ** 64n);
    expect(new Map(entry.ranks).get(1)).toBe('alice');
    const lastSeen = await api.lastSeen();
    expect(lastSeen).toBeInstanceOf(Date);
    expect(lastSeen.toISOString()).toBe('2024-05-01T12:00:00.000Z');
  });
});

describe('findNonJson', () => {
  it('finds what JSON does not carry, and where', () => {
    const cases: [unknown, (string | number)[], RegExp][] = [
      [{ user: { createdAt: new Date(0) } }, ['user', 'createdAt'], /^a Date \(sent as a string/],
      [[1, 2n], [1], /^a bigint \(cannot be sent/],
      [{ m: new Map() }, ['m'], /^a Map \(sent as \{\}/],
      [{ s: new Set([1]) }, ['s'], /^a Set \(sent as \{\}/],
      [{ f: () => 1 }, ['f'], /^a function/],
      [{ s: Symbol('x') }, ['s'], /^a symbol/],
      [{ n: Number.NaN }, ['n'], /^NaN \(sent as null\)/],
      [[Infinity], [0], /^Infinity \(sent as null\)/],
      [{ bytes: new Uint8Array(2) }, ['bytes'], /^binary data/],
      [{ at: new Point(1, 2) }, ['at'], /^an instance of Point/],
      [[1, undefined], [1], /^undefined in an array \(sent as null\)/],
      // eslint-disable-next-line no-sparse-arrays
      [[1, , 3], [1], /^undefined in an array/],
    ];
    for (const [value, path, found] of cases) {
      expect(findNonJson(value), JSON.stringify(path)).toEqual({
        path,
        found: expect.stringMatching(found),
      });
    }
    const cycle: Record<string, unknown> = { a: 1 };
    cycle['self'] = cycle;
    expect(findNonJson({ cycle })).toEqual({
      path: ['cycle', 'self'],
      found: expect.stringMatching(/^a circular reference/),
    });
  });

  it('passes plain JSON values, undefined members and shared (not circular) references', () => {
    const shared = { x: 1 };
    const values: unknown[] = [
      null,
      'text',
      0,
      -1.5,
      true,
      [],
      {},
      Object.create(null),
      { a: [shared, shared], b: { c: [null, 'd'] }, optional: undefined },
      undefined,
    ];
    for (const value of values) expect(findNonJson(value)).toBeUndefined();
  });
});

/** What the types let through (z.any(), z.unknown(), a cast), the run-time check catches. */
const loose = defineContract({
  name: 'loose',
  version: '1.0.0',
  methods: {
    get: {
      params: z.object({ kind: z.enum(['date', 'bigint', 'map', 'plain']) }),
      result: z.any(),
    },
  },
  notifications: { changed: { params: z.object({ value: z.unknown() }) } },
  subscriptions: { 'feed.*': { data: z.unknown() } },
});

function looseValue(kind: 'date' | 'bigint' | 'map' | 'plain'): unknown {
  if (kind === 'date') return { user: { createdAt: new Date(0) } };
  if (kind === 'bigint') return { total: [1n] };
  if (kind === 'map') return { byName: new Map([['a', 1]]) };
  return { plain: [1, 'two'] };
}

async function looseGateway(validateResults: boolean) {
  const { logger, records } = captureLogger();
  const running = await res.gateway({ logger });
  implementContract(
    running.gateway,
    loose,
    { methods: { get: ({ kind }) => looseValue(kind) } },
    { validateResults },
  );
  return { ...running, records };
}

describe('in debug mode (validateResults), what is sent is checked as JSON', () => {
  it('a result that is not JSON answers -32603 naming the path, and is logged', async () => {
    const { url, records } = await looseGateway(true);
    const client = res.client(url);
    const date = (await rejectionOf(client.call('get', { kind: 'date' }))) as JsonRpcError;
    expect({ code: date.code, message: date.message, data: date.data }).toEqual({
      code: -32603,
      message: 'Result is not JSON',
      data: {
        method: 'get',
        path: ['user', 'createdAt'],
        found: expect.stringMatching(/^a Date \(sent as a string/),
      },
    });
    const big = (await rejectionOf(client.call('get', { kind: 'bigint' }))) as JsonRpcError;
    expect(big.data).toMatchObject({ path: ['total', 0], found: expect.stringMatching(/bigint/) });
    const map = (await rejectionOf(client.call('get', { kind: 'map' }))) as JsonRpcError;
    expect(map.data).toMatchObject({ path: ['byName'], found: expect.stringMatching(/^a Map/) });
    expect(await client.call('get', { kind: 'plain' })).toEqual({ plain: [1, 'two'] });

    const logged = records.filter((r) => r.msg === 'Result is not JSON: not sent');
    expect(logged.map((r) => r.obj)).toEqual([
      expect.objectContaining({ method: 'get', path: ['user', 'createdAt'] }),
      expect.objectContaining({ method: 'get', path: ['total', 0] }),
      expect.objectContaining({ method: 'get', path: ['byName'] }),
    ]);
  });

  it('without debug mode nothing is walked: a Date goes out as JSON.stringify writes it', async () => {
    const { url } = await looseGateway(false);
    expect(await res.client(url).call('get', { kind: 'date' })).toEqual({
      user: { createdAt: '1970-01-01T00:00:00.000Z' },
    });
  });

  it('notifications, notifyUser and published data too: -32603, nothing sent', async () => {
    const { gateway, url } = await res.gateway();
    implementContract(gateway, loose, { methods: { get: ({ kind }) => looseValue(kind) } });
    const events = contractEvents(gateway, loose, { validateResults: true });
    const sessionOpened = firstValueFrom(gateway.connected$);
    const client = res.client(url);
    const bound = useContract(client, loose);
    const received = firstValueFrom(bound.notifications('changed'));
    const fed = firstValueFrom(bound.subscribe('feed.a').pipe(take(1), toArray()));
    await client.opened();
    const session = await sessionOpened;
    await waitUntil(() => gateway.pubsub.topics()['feed.a'] === 1, 'the server subscription');

    let thrown: unknown;
    try {
      events.notify(session, 'changed', { value: new Set([1]) });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toMatchObject({
      code: -32603,
      message: 'Notification is not JSON',
      data: { notification: 'changed', path: ['value'], found: expect.stringMatching(/^a Set/) },
    });
    const toUser = (await rejectionOf(
      events.notifyUser('alice', 'changed', { value: [Number.NaN] }),
    )) as JsonRpcError;
    expect(toUser.data).toMatchObject({ path: ['value', 0], found: 'NaN (sent as null)' });
    const published = (await rejectionOf(
      events.publish('feed.a', { at: new Date(0) }),
    )) as JsonRpcError;
    expect({ message: published.message, data: published.data }).toMatchObject({
      message: 'Published data is not JSON',
      data: { topic: 'feed.a', path: ['at'] },
    });

    // Only what is JSON went out.
    events.notify(session, 'changed', { value: 'ok' });
    await events.publish('feed.a', { ok: true });
    expect(await received).toEqual({ value: 'ok' });
    expect(await fed).toEqual([{ ok: true }]);
  });
});

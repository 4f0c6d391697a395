import fc from 'fast-check';
import { firstValueFrom, of, take, toArray } from 'rxjs';
import type { Observable } from 'rxjs';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { useContract } from '../../src/client/contract-client.js';
import type { RpcClient } from '../../src/client/client.js';
import { mergeContracts } from '../../src/contract/compose.js';
import { defineContract } from '../../src/contract/contract.js';
import type { Contract } from '../../src/contract/contract.js';
import { clientApi, contractEvents, implementContract } from '../../src/server/contract-server.js';
import { openrpcValidator } from './openrpc-meta.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';
import { typeErrors } from './type-errors.js';

/*
 * Contracts composed of smaller ones (routers): each route's names prefixed with its key,
 * further contracts as they are, in every group; duplicates refused. The composed names are
 * the wire names, and the nested API follows from their dots.
 */

const res = new Resources();
afterEach(() => res.cleanup());

declare const client: RpcClient;

/** Type-checked, never run: for calls whose only point is the compiler's verdict. */
function compileOnly(body: () => unknown): void {
  expect(typeof body).toBe('function');
}

const Message = z.object({ text: z.string(), from: z.string().default('anonymous') });

const chat = defineContract({
  name: 'chat',
  version: '1.0.0',
  methods: {
    send: { params: z.object({ text: z.string() }), paramOrder: ['text'], result: z.number() },
    history: { result: z.array(Message) },
  },
  notifications: { typing: { params: z.object({ who: z.string() }) } },
  clientMethods: { confirm: { params: z.object({ question: z.string() }), result: z.boolean() } },
  subscriptions: {
    'room.*': { data: Message },
    countdown: { params: z.object({ from: z.number().int() }), data: z.number() },
  },
});

const orders = defineContract({
  name: 'orders',
  version: '2.0.0',
  methods: {
    place: { params: z.object({ item: z.string() }), result: z.string() },
    'status.get': { params: z.tuple([z.string()]), result: z.enum(['open', 'shipped']) },
  },
  subscriptions: { updates: { data: z.object({ id: z.string() }) } },
});

const health = defineContract({
  name: 'health',
  version: '1.0.0',
  methods: { ping: { result: z.literal('pong') } },
});

const app = mergeContracts(
  { name: 'app', version: '3.0.0', description: 'Chat and orders' },
  { chat, orders },
  health,
);

describe('mergeContracts at compile time', () => {
  it('prefixes every group of each route and keeps the other contracts as they are', () => {
    expectTypeOf<keyof typeof app.methods>().toEqualTypeOf<
      'chat.send' | 'chat.history' | 'orders.place' | 'orders.status.get' | 'ping'
    >();
    expectTypeOf<keyof typeof app.notifications>().toEqualTypeOf<'chat.typing'>();
    expectTypeOf<keyof typeof app.clientMethods>().toEqualTypeOf<'chat.confirm'>();
    expectTypeOf<keyof typeof app.subscriptions>().toEqualTypeOf<
      'chat.room.*' | 'chat.countdown' | 'orders.updates'
    >();
    expectTypeOf(app.methods['chat.send']).toEqualTypeOf(chat.methods.send);
    compileOnly(() => {
      const { api, subscribe, notifications } = useContract(client, app);
      expectTypeOf(api.chat.send).returns.toEqualTypeOf<Promise<number>>();
      expectTypeOf(api.orders.status.get).parameter(0).toEqualTypeOf<[string]>();
      expectTypeOf(api.ping).returns.toEqualTypeOf<Promise<'pong'>>();
      expectTypeOf(subscribe('chat.room.lobby')).toEqualTypeOf<
        Observable<{ text: string; from: string }>
      >();
      expectTypeOf(notifications('chat.typing')).toEqualTypeOf<Observable<{ who: string }>>();
      // @ts-expect-error send is under chat
      void api.send({ text: 'x' });
      // @ts-expect-error room.* is under chat
      subscribe('room.lobby');
    });
  });

  it('refuses a name two parts define', () => {
    const legacy = defineContract({
      name: 'legacy',
      version: '1.0.0',
      methods: { 'chat.send': { result: z.number() } },
    });
    const inner = defineContract({ name: 'inner', version: '1.0.0', methods: { c: {} } });
    const outer = defineContract({ name: 'outer', version: '1.0.0', methods: { 'b.c': {} } });
    compileOnly(() => [
      // @ts-expect-error chat.send comes from the route and from legacy
      mergeContracts({ name: 'x', version: '1' }, { chat }, legacy),
      // @ts-expect-error a.b.c comes from both routes
      mergeContracts({ name: 'x', version: '1' }, { a: outer, 'a.b': inner }),
      // @ts-expect-error ping twice
      mergeContracts({ name: 'x', version: '1' }, {}, health, health),
      // Different groups may share a name: a method and a notification go different ways.
      mergeContracts(
        { name: 'x', version: '1' },
        { chat },
        { ...health, methods: { 'chat.typing': {} } },
      ),
    ]);
  });

  it('says which name is defined twice', { timeout: 60_000 }, () => {
    const errors = typeErrors(`
import { z } from 'zod';
import { defineContract } from '../../src/contract/contract.js';
import { mergeContracts } from '../../src/contract/compose.js';
const a = defineContract({ name: 'a', version: '1', methods: { 'x.send': { result: z.number() } } });
const b = defineContract({ name: 'b', version: '1', methods: { send: { result: z.number() } } });
mergeContracts({ name: 'ab', version: '1' }, { x: b }, a);
`);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain('"method x.send is defined twice"');
  });
});

describe('mergeContracts at run time', () => {
  it('composes every group under the routes, the specs as they were', () => {
    expect(app.name).toBe('app');
    expect(app.version).toBe('3.0.0');
    expect(app.description).toBe('Chat and orders');
    expect(app.methods).toStrictEqual({
      'chat.send': chat.methods.send,
      'chat.history': chat.methods.history,
      'orders.place': orders.methods.place,
      'orders.status.get': orders.methods['status.get'],
      ping: health.methods.ping,
    });
    expect(app.notifications).toStrictEqual({ 'chat.typing': chat.notifications.typing });
    expect(app.clientMethods).toStrictEqual({ 'chat.confirm': chat.clientMethods.confirm });
    expect(Object.keys(app.subscriptions)).toEqual([
      'chat.room.*',
      'chat.countdown',
      'orders.updates',
    ]);
    // A composed contract composes again.
    const versioned = mergeContracts({ name: 'v', version: '1' }, { v1: app });
    expect(Object.keys(versioned.methods)).toContain('v1.orders.status.get');
    expectTypeOf(versioned.methods['v1.chat.send']).toEqualTypeOf(chat.methods.send);
  });

  it('refuses a duplicate name or a bad route key, precisely', () => {
    const info = { name: 'x', version: '1' };
    const legacy: Contract = { name: 'legacy', version: '1', methods: { 'chat.send': {} } };
    expect(() => mergeContracts(info, { chat } as never, legacy)).toThrow(
      'The method "chat.send" is defined twice: by route "chat" (contract "chat") and by contract 1 ("legacy")',
    );
    const topics: Contract = { name: 't', version: '1', methods: {}, subscriptions: { x: {} } };
    expect(() =>
      mergeContracts(info, { a: { ...topics, subscriptions: { 'b.x': {} } }, 'a.b': topics }),
    ).toThrow('The subscription "a.b.x" is defined twice: by route "a" (contract "t")');
    for (const key of ['', 'a..b', '.a', 'a.', 'room.*', '*']) {
      expect(() => mergeContracts(info, { [key]: health })).toThrow(
        `The route "${key}" is not a prefix: dot-separated names, none empty, without "*"`,
      );
    }
    for (const key of ['rpc', 'rpc.v1']) {
      expect(() => mergeContracts(info, { [key]: health })).toThrow(
        `The route "${key}" is reserved: names starting with "rpc." belong to the protocol`,
      );
    }
  });

  it('holds every name of every part once, or throws naming one given twice', () => {
    const name = fc.constantFrom('a', 'b', 'a.b', 'b.a', '__proto__');
    const group = fc.uniqueArray(name, { maxLength: 3 });
    const part = fc.record({ methods: group, subscriptions: group });
    const toContract = (p: { methods: string[]; subscriptions: string[] }, i: number) => ({
      name: `c${i}`,
      version: '1',
      methods: Object.fromEntries(p.methods.map((n) => [n, { description: `${i}:${n}` }])),
      subscriptions: Object.fromEntries(p.subscriptions.map((n) => [n, { description: n }])),
    });
    const routes = fc.dictionary(fc.constantFrom('a', 'b', 'a.b'), part, { maxKeys: 3 });
    fc.assert(
      fc.property(routes, fc.array(part, { maxLength: 2 }), (routeParts, plainParts) => {
        const routed = Object.entries(routeParts).map(
          ([key, p], i) => [key, toContract(p, i)] as const,
        );
        const plain = plainParts.map((p, i) => toContract(p, 100 + i));
        const expected: Record<'methods' | 'subscriptions', [string, unknown][]> = {
          methods: [],
          subscriptions: [],
        };
        for (const g of ['methods', 'subscriptions'] as const) {
          for (const [key, c] of routed) {
            for (const [n, spec] of Object.entries(c[g])) expected[g].push([`${key}.${n}`, spec]);
          }
          for (const c of plain) expected[g].push(...Object.entries(c[g]));
        }
        const run = () =>
          mergeContracts({ name: 'm', version: '1' }, Object.fromEntries(routed), ...plain);
        const twice = (['methods', 'subscriptions'] as const).flatMap((g) =>
          expected[g]
            .map(([n]) => n)
            .filter((n, i, all) => all.indexOf(n) !== i)
            .map(
              (n) => `The ${g === 'methods' ? 'method' : 'subscription'} "${n}" is defined twice`,
            ),
        );
        if (twice.length > 0) {
          let message = '';
          try {
            run();
          } catch (err) {
            message = (err as Error).message;
          }
          expect(twice.some((start) => message.startsWith(`${start}: by `))).toBe(true);
          return;
        }
        const merged = run();
        for (const g of ['methods', 'subscriptions'] as const) {
          const got = merged[g] as Record<string, unknown>;
          expect(Object.keys(got).sort()).toEqual(expected[g].map(([n]) => n).sort());
          for (const [n, spec] of expected[g]) expect(got[n]).toBe(spec);
        }
      }),
    );
  });
});

describe('a composed contract over a socket', () => {
  it("is served by its parts' handlers and used through the nested API", async () => {
    const { gateway, url, httpUrl } = await res.gateway();
    const chatHandlers = {
      send: ({ text }: { text: string }) => text.length,
      history: () => [{ text: 'first' }],
    };
    const document = implementContract(gateway, app, {
      methods: {
        chat: chatHandlers,
        orders: {
          place: ({ item }) => `order-${item}`,
          status: { get: ([id]) => (id === 'order-tea' ? 'shipped' : 'open') },
        },
        ping: () => 'pong' as const,
      },
      streams: {
        'chat.countdown': ({ from }) => of(...Array.from({ length: from + 1 }, (_, i) => from - i)),
      },
    });
    const events = contractEvents(gateway, app, { validateResults: true });
    const sessionOpened = firstValueFrom(gateway.connected$);
    const client = res.client(url);
    const { api, subscribe, notifications } = useContract(client, app, {
      chat: { confirm: ({ question }) => question.endsWith('?') },
    });

    expect(await api.chat.send({ text: 'hello' })).toBe(5);
    expect(await api['chat.send'](['hi'])).toBe(2);
    expect(await api.chat.history()).toStrictEqual([{ text: 'first', from: 'anonymous' }]);
    expect(await api.orders.place({ item: 'tea' })).toBe('order-tea');
    expect(await api.orders.status.get(['order-tea'])).toBe('shipped');
    expect(await api.ping()).toBe('pong');
    // The wire names are the composed ones.
    expect(await client.call('orders.status.get', ['x'])).toBe('open');

    const session = await sessionOpened;
    expect(await clientApi(session, app).chat.confirm({ question: 'ok?' })).toBe(true);

    const typing = firstValueFrom(notifications('chat.typing'));
    events.notify(session, 'chat.typing', { who: 'ann' });
    expect(await typing).toStrictEqual({ who: 'ann' });

    expect(await firstValueFrom(subscribe('chat.countdown', { from: 2 }).pipe(toArray()))).toEqual([
      2, 1, 0,
    ]);
    const lobby = firstValueFrom(subscribe('chat.room.lobby').pipe(take(1)));
    await waitUntil(() => gateway.pubsub.topics()['chat.room.lobby'] === 1, 'the subscription');
    await events.publish('chat.room.lobby', { text: 'hi' });
    expect(await lobby).toStrictEqual({ text: 'hi', from: 'anonymous' });

    // The OpenRPC document lists the composed names, and is a valid one.
    expect(document.info).toMatchObject({ title: 'app', version: '3.0.0' });
    expect(document.methods.map((m) => m.name)).toEqual(
      expect.arrayContaining(['chat.send', 'orders.status.get', 'ping']),
    );
    const served = (await (await fetch(`${httpUrl}/openrpc.json`)).json()) as unknown;
    expect(served).toStrictEqual(JSON.parse(JSON.stringify(document)));
    expect(openrpcValidator()(served)).toBe(true);
  });
});

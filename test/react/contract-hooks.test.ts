// @vitest-environment happy-dom
/**
 * createHooks(contract): the hooks typed by a contract (a wrong name or params does not
 * compile, checked by `tsc` over this file) and validated by it at run time: a call's result
 * and each message are parsed with the contract's schemas, and a message that does not match
 * ends the subscription with a local -32603.
 */
import { act, cleanup, screen } from '@testing-library/react';
import { createElement } from 'react';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { mergeContracts } from '../../src/contract/compose.js';
import { defineContract } from '../../src/contract/contract.js';
import { createHooks } from '../../src/react/index.js';
import { implementContract } from '../../src/server/contract-server.js';
import { Resources } from '../support/resources.js';
import { waitFor as waitUntil } from '../support/waiting.js';
import { renderWith } from './harness.js';

const res = new Resources();
afterEach(async () => {
  cleanup();
  await res.cleanup();
});

const Message = z.object({ text: z.string(), likes: z.number().default(0) });

const chat = defineContract({
  name: 'chat',
  version: '1.0.0',
  methods: {
    'chat.send': {
      params: z.object({ text: z.string() }),
      paramOrder: ['text'],
      result: z.number(),
    },
    'chat.count': { result: z.number() },
    // The server below answers a string: the result schema refuses it.
    'chat.broken': { result: z.number() },
  },
  subscriptions: { 'room.*': { data: Message } },
});

const { useCall, useMutation, useSubscription } = createHooks(chat);

async function setup() {
  const { url, gateway } = await res.gateway();
  let sent = 0;
  implementContract(gateway, chat, {
    methods: {
      'chat.send': async ({ text }) => {
        await gateway.publish('room.lobby', { text });
        return ++sent;
      },
      'chat.count': () => sent,
      'chat.broken': () => 'not a number' as unknown as number,
    },
  });
  return { gateway, client: res.client(url) };
}

const textOf = (id: string) => screen.getByTestId(id).textContent;

describe('createHooks', () => {
  it('types and parses calls, mutations and messages by the contract', async () => {
    const { client } = await setup();
    let send!: ReturnType<typeof useMutation<'chat.send'>>;
    function Room() {
      const count = useCall('chat.count');
      send = useMutation('chat.send');
      const room = useSubscription('room.lobby', undefined, { history: 2 });
      // Typed by the contract: likes is a number (its default applied by the parse).
      const likes: number[] = room.history.map((m) => m.likes);
      const sentSeq: number | undefined = send.data;
      return createElement(
        'div',
        null,
        createElement('p', { 'data-testid': 'count' }, String(count.data)),
        createElement('p', { 'data-testid': 'status' }, room.status.state),
        createElement(
          'p',
          { 'data-testid': 'room' },
          `${room.history.map((m) => m.text).join(',')} ${likes.join(',')} ${sentSeq}`,
        ),
      );
    }
    renderWith(client, createElement(Room));
    await waitUntil(() => textOf('count') === '0', 'the count');
    await waitUntil(() => textOf('status') === 'subscribed', 'subscribed');
    act(() => send.mutate({ text: 'hello' }));
    await waitUntil(() => textOf('room') === 'hello 0 1', 'the message, parsed');
    act(() => send.mutate(['again']));
    await waitUntil(() => textOf('room') === 'hello,again 0,0 2', 'the second message');
  });

  it('fails a call whose result does not match the contract with -32603', async () => {
    const { client } = await setup();
    let error: unknown;
    function Broken() {
      const call = useCall('chat.broken');
      error = call.error;
      return createElement('p', { 'data-testid': 'broken' }, call.loading ? 'loading' : 'done');
    }
    renderWith(client, createElement(Broken));
    await waitUntil(() => textOf('broken') === 'done', 'the answer');
    expect(error).toMatchObject({
      code: -32603,
      message: 'Result does not match the contract',
      data: { method: 'chat.broken' },
    });
  });

  it('ends the subscription with -32603 at a message that does not match the contract', async () => {
    const { gateway, client } = await setup();
    let error: unknown;
    function Room() {
      const room = useSubscription('room.lobby');
      error = room.error;
      return createElement(
        'p',
        { 'data-testid': 'room' },
        `${room.status.state} ${room.data?.text}`,
      );
    }
    renderWith(client, createElement(Room));
    await waitUntil(() => textOf('room') === 'subscribed undefined', 'subscribed');
    await gateway.publish('room.lobby', { text: 'fine' });
    await waitUntil(() => textOf('room') === 'subscribed fine', 'the valid message');
    await gateway.publish('room.lobby', { text: 42 });
    await waitUntil(() => textOf('room') === 'error fine', 'the refusal');
    expect(error).toMatchObject({
      code: -32603,
      message: 'Subscription data does not match the contract',
      data: { subscription: 'room.lobby' },
    });
  });

  it('refuses names and params the contract does not have, at compile time', () => {
    // Never rendered: the lines below are for `tsc`, which fails if an error goes away.
    const uses = () => {
      // @ts-expect-error -- no such method
      useCall('chat.nope');
      // @ts-expect-error -- chat.send takes { text: string }
      useCall('chat.send', { text: 42 });
      // @ts-expect-error -- chat.send needs params
      useMutation('chat.send').mutate();
      // @ts-expect-error -- not a topic of the contract
      useSubscription('lobby');
      const count: string | undefined = useCall('chat.count').data?.toFixed();
      return count;
    };
    expect(typeof uses).toBe('function');
  });
});

/** Routers: a contract of two smaller ones, each method's name prefixed (`shop.cart.add`). */
const cart = defineContract({
  name: 'cart',
  version: '1.0.0',
  methods: {
    add: { params: z.object({ sku: z.string(), qty: z.number() }), result: z.number() },
    total: { result: z.number() },
  },
});
const status = defineContract({
  name: 'status',
  version: '1.0.0',
  methods: { ping: { result: z.literal('pong') } },
});
const shop = mergeContracts({ name: 'shop', version: '1.0.0' }, { 'shop.cart': cart, status });
const shopHooks = createHooks(shop);

describe('createHooks with a composed contract and nested names', () => {
  it("takes the composed contract's dotted names, and the same hooks as a path (api.shop.cart.add)", async () => {
    const { url, gateway } = await res.gateway();
    let items = 0;
    implementContract(gateway, shop, {
      methods: {
        shop: { cart: { add: ({ qty }) => (items += qty), total: () => items } },
        status: { ping: () => 'pong' as const },
      },
    });
    const client = res.client(url);
    let add!: ReturnType<typeof shopHooks.api.shop.cart.add.useMutation>;
    function Shop() {
      const byName = shopHooks.useCall('status.ping');
      const nested = shopHooks.api.status.ping.useCall();
      const total = shopHooks.api.shop.cart.total.useCall();
      add = shopHooks.api.shop.cart.add.useMutation();
      const pong: 'pong' | undefined = nested.data;
      const sum: number | undefined = add.data;
      return createElement(
        'p',
        { 'data-testid': 'shop' },
        `${byName.data} ${pong} ${total.data} ${sum}`,
      );
    }
    renderWith(client, createElement(Shop));
    await waitUntil(() => textOf('shop') === 'pong pong 0 undefined', 'the calls');
    act(() => add.mutate({ sku: 'a', qty: 2 }));
    await waitUntil(() => textOf('shop') === 'pong pong 0 2', 'the mutation');
    expect(Object.keys(shopHooks.api).sort()).toEqual([
      'shop',
      'shop.cart.add',
      'shop.cart.total',
      'status',
      'status.ping',
    ]);
    expect(shopHooks.api['shop.cart.add']).toBe(shopHooks.api.shop.cart.add);
  });

  it('offers a method named "__proto__" as its own member of api', () => {
    const odd = defineContract({
      name: 'odd',
      version: '1.0.0',
      // A computed key: `__proto__:` in a literal would set the prototype instead.
      methods: { ['__proto__']: { result: z.string() }, constructor: { result: z.string() } },
    });
    const { api } = createHooks(odd);
    expect(Object.keys(api).sort()).toEqual(['__proto__', 'constructor']);
    expect(typeof api['__proto__'].useCall).toBe('function');
  });

  it('refuses what the composed contract does not have, by name and by path, at compile time', () => {
    // Never rendered: the lines below are for `tsc`, which fails if an error goes away.
    const uses = () => {
      // @ts-expect-error -- the route's names are prefixed: "add" alone is not a method
      shopHooks.useCall('add');
      // @ts-expect-error -- qty is a number
      shopHooks.api.shop.cart.add.useMutation().mutate({ sku: 'a', qty: '2' });
      // @ts-expect-error -- no such method under shop.cart
      shopHooks.api.shop.cart.remove.useCall();
      // @ts-expect-error -- total takes no params
      shopHooks.api.shop.cart.total.useCall({ all: true });
      const total: number | undefined = shopHooks.api['shop.cart.total'].useCall().data;
      return total;
    };
    expect(typeof uses).toBe('function');
  });
});

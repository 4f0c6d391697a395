import { firstValueFrom, of, take, toArray } from 'rxjs';
import type { Observable } from 'rxjs';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { useContract } from '../../src/client/contract-client.js';
import type { RpcClient } from '../../src/client/client.js';
import { defineContract } from '../../src/contract/contract.js';
import { specOfTopic } from '../../src/contract/topic-names.js';
import type { JsonRpcError } from '../../src/protocol/errors.js';
import { contractEvents, implementContract } from '../../src/server/contract-server.js';
import type { Gateway } from '../../src/server/gateway.js';
import { rejectionOf } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

/*
 * A subscription key ending in `*` is a wildcard topic, as `gateway.topic` declares one:
 * published and subscribed under its concrete names (`room.lobby` for `room.*`), with the
 * pattern's payload type and schema; exact names stay exact.
 */

const res = new Resources();
afterEach(() => res.cleanup());

const chat = defineContract({
  name: 'chat',
  version: '1.0.0',
  methods: {},
  subscriptions: {
    'room.*': { data: z.object({ text: z.string(), from: z.string().default('anonymous') }) },
    /** A longer prefix than room.*: its own payload. */
    'room.vip.*': { data: z.object({ text: z.string(), tier: z.number() }) },
    prices: { data: z.object({ price: z.number() }) },
    countdown: { params: z.object({ from: z.number() }), data: z.number() },
  },
});

declare const client: RpcClient;
declare const gateway: Gateway;

/** Type-checked, never run: for calls whose only point is the compiler's verdict. */
function compileOnly(body: () => unknown): void {
  expect(typeof body).toBe('function');
}

describe('wildcard topics at compile time', () => {
  it('type concrete names with the payload of their pattern, on both ends', () => {
    compileOnly(() => {
      const { subscribe } = useContract(client, chat);
      const { publish } = contractEvents(gateway, chat);
      expectTypeOf(subscribe('room.lobby')).toEqualTypeOf<
        Observable<{ text: string; from: string }>
      >();
      const id: string = 'x';
      expectTypeOf(subscribe(`room.${id}`)).toEqualTypeOf<
        Observable<{ text: string; from: string }>
      >();
      expectTypeOf(subscribe('prices')).toEqualTypeOf<Observable<{ price: number }>>();
      void publish('room.lobby', { text: 'hi' }); // the input type: from may be left out
      void publish(`room.${id}`, { text: 'hi', from: 'ann' });
      void publish('prices', { price: 1 });

      // @ts-expect-error text is a string
      void publish('room.lobby', { text: 1 });
      // @ts-expect-error "rooms.lobby" is not under room.*
      subscribe('rooms.lobby');
      // @ts-expect-error "room" lacks the prefix's dot
      void publish('room', { text: 'hi' });
      // @ts-expect-error exact names stay exact
      subscribe('prices.BTC');
      // @ts-expect-error a plain string may be any topic
      subscribe(id);
    });
  });

  it('type a name under two patterns as either payload (the longest prefix wins at run time)', () => {
    compileOnly(() => {
      const { subscribe } = useContract(client, chat);
      expectTypeOf(subscribe('room.vip.gold')).toEqualTypeOf<
        Observable<{ text: string; from: string } | { text: string; tier: number }>
      >();
    });
  });

  it('cannot be streams: a stream has one exact name', () => {
    compileOnly(() =>
      implementContract(gateway, chat, {
        methods: {},
        streams: {
          countdown: ({ from }) => of(from),
          // @ts-expect-error room.* can only be a topic
          'room.*': () => of(1),
        },
      }),
    );
  });
});

describe('specOfTopic', () => {
  it('finds the exact key first, then the longest wildcard prefix', () => {
    const specs = { 'a.*': 1, 'a.b.*': 2, 'a.b.c': 3, 'x*': 4 };
    expect(specOfTopic(specs, 'a.b.c')).toBe(3);
    expect(specOfTopic(specs, 'a.b.d')).toBe(2);
    expect(specOfTopic(specs, 'a.z')).toBe(1);
    expect(specOfTopic(specs, 'xyz')).toBe(4);
    expect(specOfTopic(specs, 'a')).toBeUndefined();
    expect(specOfTopic(specs, 'toString')).toBeUndefined();
  });
});

describe('wildcard topics at run time', () => {
  async function chatGateway() {
    const running = await res.gateway();
    implementContract(running.gateway, chat, {
      methods: {},
      streams: { countdown: ({ from }) => of(from, from - 1) },
    });
    const events = contractEvents(running.gateway, chat, { validateResults: true });
    const bound = useContract(res.client(running.url), chat);
    return { ...running, events, bound };
  }

  it("messages under a concrete name are parsed with the pattern's schema", async () => {
    const { gateway, events, bound } = await chatGateway();
    const lobby = firstValueFrom(bound.subscribe('room.lobby').pipe(take(2), toArray()));
    const gold = firstValueFrom(bound.subscribe('room.vip.gold').pipe(take(1), toArray()));
    await waitUntil(
      () =>
        gateway.pubsub.topics()['room.lobby'] === 1 &&
        gateway.pubsub.topics()['room.vip.gold'] === 1,
      'the server subscriptions',
    );
    await events.publish('room.lobby', { text: 'hi' });
    await events.publish('room.lobby', { text: 'yo', from: 'ann' });
    await events.publish('room.vip.gold', { text: 'welcome', tier: 3 });
    // The default of room.*'s schema applied: the client parsed with it.
    expect(await lobby).toStrictEqual([
      { text: 'hi', from: 'anonymous' },
      { text: 'yo', from: 'ann' },
    ]);
    expect(await gold).toStrictEqual([{ text: 'welcome', tier: 3 }]);

    // Off the pattern's schema: the client's parse fails, as for an exact name.
    const next = firstValueFrom(bound.subscribe('room.hall'));
    await waitUntil(() => gateway.pubsub.topics()['room.hall'] === 1, 'the server subscription');
    await gateway.publish('room.hall', { text: 42 });
    const error = (await rejectionOf(next)) as JsonRpcError;
    expect({ code: error.code, data: error.data }).toMatchObject({
      code: -32603,
      data: { subscription: 'room.hall', issues: [{ path: ['text'] }] },
    });
  });

  it("debug mode checks publishing under a concrete name against the pattern's schema", async () => {
    const { events } = await chatGateway();
    const error = (await rejectionOf(
      events.publish('room.vip.gold', { text: 'no tier' } as never),
    )) as JsonRpcError;
    expect({ code: error.code, message: error.message, data: error.data }).toMatchObject({
      code: -32603,
      message: 'Published data does not match the contract',
      data: { topic: 'room.vip.gold', issues: [{ path: ['tier'] }] },
    });
  });
});

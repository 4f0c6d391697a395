import fc from 'fast-check';
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { useContract } from '../../src/client/contract-client.js';
import type { RpcClient } from '../../src/client/client.js';
import { bindMethods } from '../../src/contract/bind.js';
import { defineContract } from '../../src/contract/contract.js';
import { findHandler, nestNames, strayHandlers } from '../../src/contract/nested.js';
import { clientApi, implementContract } from '../../src/server/contract-server.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { Session } from '../../src/server/session.js';
import { recordingWebSocket } from '../support/client.js';
import type { WireFrame } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';

/*
 * A contract's dotted names as nested members: `api.chat.send(...)` beside
 * `api['chat.send'](...)`, on the client's API and the server's `clientApi`, and nested
 * handlers on both ends. The wire carries the full names either way.
 */

const res = new Resources();
afterEach(() => res.cleanup());

declare const client: RpcClient;
declare const gateway: Gateway;
declare const session: Session;

/** Type-checked, never run: for calls whose only point is the compiler's verdict. */
function compileOnly(body: () => unknown): void {
  expect(typeof body).toBe('function');
}

const board = defineContract({
  name: 'board',
  version: '1.0.0',
  methods: {
    /** Both a method and the prefix of others: callable, with members. */
    chat: { result: z.string() },
    'chat.send': {
      params: z.object({ text: z.string() }),
      paramOrder: ['text'],
      result: z.number().int(),
    },
    'chat.room.join': { params: z.object({ room: z.string() }), result: z.boolean() },
    /** A member every function has (`name`): under `chat`, the method is what is found. */
    'chat.name': { result: z.string() },
    'a.b.c.d': { params: z.tuple([z.number()]), result: z.number() },
    ping: { result: z.literal('pong') },
  },
  clientMethods: {
    'client.confirm': { params: z.object({ question: z.string() }), result: z.boolean() },
    'client.ui.toast': { params: z.object({ text: z.string() }), result: z.null() },
  },
});

/** Without `chat.name`: a handler cannot be assigned to a function's own `name`. */
const { 'chat.name': _name, ...withChat } = board.methods;
const chatted = defineContract({ name: 'chatted', version: '1.0.0', methods: withChat });
/** Without `chat` itself either, so every level nests as a plain object. */
const { chat: _chat, ...treeMethods } = withChat;
const tree = defineContract({ name: 'tree', version: '1.0.0', methods: treeMethods });

describe('the nested API at compile time', () => {
  it('types a dotted name as nested members and under its full name alike', () => {
    compileOnly(() => {
      const { api } = useContract(client, board);
      expectTypeOf(api.chat.send).toEqualTypeOf(api['chat.send']);
      expectTypeOf(api.chat.send).parameter(0).toEqualTypeOf<{ text: string } | [string]>();
      expectTypeOf(api.chat.send).returns.toEqualTypeOf<Promise<number>>();
      expectTypeOf(api.chat.room.join).returns.toEqualTypeOf<Promise<boolean>>();
      expectTypeOf(api.a.b.c.d).toEqualTypeOf(api['a.b.c.d']);
      expectTypeOf(api.a.b.c.d).parameter(0).toEqualTypeOf<[number]>();
      // chat is a method and a prefix: callable, with members.
      expectTypeOf(api.chat()).toEqualTypeOf<Promise<string>>();
      expectTypeOf(api.chat.name()).toEqualTypeOf<Promise<string>>();
      expectTypeOf(api.ping()).toEqualTypeOf<Promise<'pong'>>();

      // @ts-expect-error text is a string
      void api.chat.send({ text: 1 });
      // @ts-expect-error by position too
      void api.chat.send([1]);
      // @ts-expect-error no method chat.nope
      void api.chat.nope();
      // @ts-expect-error a is a prefix only: not callable
      void api.a();
      // @ts-expect-error below the top, members are segments, not dotted names
      void api.chat['room.join']({ room: 'x' });
    });
  });

  it("types the server's clientApi the same way", () => {
    compileOnly(() => {
      const api = clientApi(session, board);
      expectTypeOf(api.client.confirm).toEqualTypeOf(api['client.confirm']);
      expectTypeOf(api.client.ui.toast).returns.toEqualTypeOf<Promise<null>>();
      // @ts-expect-error question is a string
      void api.client.confirm({ question: 1 });
    });
  });

  it('types nested handlers on both ends, and refuses a missing or a stray one', () => {
    compileOnly(() => {
      implementContract(gateway, tree, {
        methods: {
          chat: { send: ({ text }) => text.length, room: { join: ({ room }) => room === 'lobby' } },
          a: { 'b.c.d': ([n]) => n * 2 },
          ping: () => 'pong' as const,
        },
      });
      // By full name, as always.
      implementContract(gateway, board, {
        methods: {
          chat: () => 'lobby',
          'chat.send': ({ text }) => text.length,
          'chat.room.join': ({ room }) => room === 'lobby',
          'chat.name': () => 'chat',
          'a.b.c.d': ([n]) => n * 2,
          ping: () => 'pong' as const,
        },
      });
      useContract(client, board, {
        client: { confirm: ({ question }) => question.endsWith('?'), ui: { toast: () => null } },
      });
      implementContract(gateway, tree, {
        methods: {
          // @ts-expect-error chat.room.join has no handler
          chat: { send: ({ text }) => text.length },
          a: { 'b.c.d': ([n]) => n * 2 },
          ping: () => 'pong' as const,
        },
      });
      implementContract(gateway, tree, {
        methods: {
          // @ts-expect-error send answers a number
          chat: { send: ({ text }) => text, room: { join: () => true } },
          a: { 'b.c.d': ([n]) => n * 2 },
          ping: () => 'pong' as const,
        },
      });
      useContract(client, board, {
        // @ts-expect-error client.greet is not a client method
        client: { confirm: () => true, ui: { toast: () => null }, greet: () => 'hi' },
      });
    });
  });
});

describe('nestNames', () => {
  it('puts each function under its full name and at its path, the same function', () => {
    const segment = fc.constantFrom('a', 'b', 'chat', 'name', 'length', 'call', '__proto__', '');
    const names = fc.uniqueArray(
      fc.array(segment, { minLength: 1, maxLength: 4 }).map((s) => s.join('.')),
      { maxLength: 12 },
    );
    fc.assert(
      fc.property(names, (list) => {
        const flat = Object.fromEntries(list.map((name) => [name, () => name]));
        const nested = nestNames(flat);
        for (const name of list) {
          expect(nested[name]).toBe(flat[name]);
          const found = name
            .split('.')
            .reduce<unknown>((node, key) => (node as Record<string, unknown>)[key], nested);
          expect(found).toBe(flat[name]);
        }
        // Every member is a name or a prefix of one, at every level: nothing else is added.
        const paths = (node: object, prefix?: string): string[] =>
          Object.keys(node).flatMap((key) => {
            const path = prefix === undefined ? key : `${prefix}.${key}`;
            return [path, ...paths((node as Record<string, object>)[key]!, path)];
          });
        for (const path of paths(nested)) {
          expect(list.some((name) => name === path || name.startsWith(`${path}.`))).toBe(true);
        }
      }),
    );
  });

  it('finds handlers by full name or nested, and refuses one given both ways', () => {
    const send = () => 1;
    expect(findHandler({ 'chat.send': send }, 'chat.send')).toBe(send);
    expect(findHandler({ chat: { send } }, 'chat.send')).toBe(send);
    expect(findHandler({ chat: { 'room.join': send } }, 'chat.room.join')).toBe(send);
    // What every object or function has is never a handler.
    expect(findHandler({}, 'toString')).toBeUndefined();
    expect(findHandler({ chat: () => 0 }, 'chat.call')).toBeUndefined();
    expect(findHandler({ constructor: {} }, 'constructor.x')).toBeUndefined();
    expect(() => findHandler({ 'chat.send': send, chat: { send } }, 'chat.send')).toThrow(
      '"chat.send" has two handlers: one under its full name, one nested',
    );
    expect(strayHandlers({ chat: { send, sned: send }, ping: send }, ['chat.send'])).toEqual([
      'chat.sned',
      'ping',
    ]);
  });
});

describe('the nested API over a socket', () => {
  async function boardGateway() {
    const running = await res.gateway();
    implementContract(running.gateway, board, {
      methods: {
        chat: () => 'lobby',
        'chat.send': ({ text }) => text.length,
        'chat.room.join': ({ room }) => room === 'lobby',
        'chat.name': () => 'the chat',
        'a.b.c.d': ([n]) => n * 2,
        ping: () => 'pong' as const,
      },
    });
    const sent: WireFrame[] = [];
    const client = res.client(running.url, { WebSocket: recordingWebSocket(sent) });
    return { ...running, client, sent };
  }

  it('calls the same method under either form, by its full name on the wire', async () => {
    const { client, sent } = await boardGateway();
    const { api } = useContract(client, board);
    expect(await api.chat.send({ text: 'hello' })).toBe(5);
    expect(await api['chat.send'](['hi'])).toBe(2);
    expect(await api.chat.room.join({ room: 'lobby' })).toBe(true);
    expect(await api['chat.room.join']({ room: 'attic' })).toBe(false);
    expect(await api.chat()).toBe('lobby');
    expect(await api.chat.name()).toBe('the chat');
    expect(await api.a.b.c.d([21])).toBe(42);
    expect(await api.ping()).toBe('pong');
    expect(sent.map((frame) => frame.method)).toEqual([
      'chat.send',
      'chat.send',
      'chat.room.join',
      'chat.room.join',
      'chat',
      'chat.name',
      'a.b.c.d',
      'ping',
    ]);
  });

  it('offers a method named "__proto__" as its own member, as the server serves it', async () => {
    const odd = defineContract({
      name: 'odd',
      version: '1.0.0',
      // A computed key: `__proto__:` in a literal would set the prototype instead.
      methods: { ['__proto__']: { result: z.string() }, constructor: { result: z.string() } },
    });
    const { gateway, url } = await res.gateway();
    implementContract(gateway, odd, {
      methods: { ['__proto__']: () => 'proto', constructor: () => 'made' },
    });
    const { api } = useContract(res.client(url), odd);
    expect(Object.keys(api).sort()).toEqual(['__proto__', 'constructor']);
    expect(await api['__proto__']()).toBe('proto');
    expect(await api.constructor()).toBe('made');
  });

  it('runs nested handlers on the server, a name that is also a prefix included', async () => {
    const { gateway, url } = await res.gateway();
    implementContract(gateway, chatted, {
      methods: {
        // Typed by hand: Object.assign does not pass the contract's types down.
        chat: Object.assign(() => 'lobby', {
          send: ({ text }: { text: string }) => text.length,
          room: { join: ({ room }: { room: string }) => room === 'lobby' },
        }),
        a: { b: { 'c.d': ([n]: [number]) => n * 2 } },
        ping: () => 'pong' as const,
      },
    });
    const client = res.client(url);
    expect(await client.call('chat')).toBe('lobby');
    expect(await client.call('chat.send', ['hello'])).toBe(5);
    expect(await client.call('chat.room.join', { room: 'lobby' })).toBe(true);
    expect(await client.call('a.b.c.d', [4])).toBe(8);
  });

  it('calls the client through nested handlers and a nested clientApi', async () => {
    const { gateway, url } = await res.gateway();
    implementContract(gateway, tree, {
      methods: {
        chat: { send: () => 0, room: { join: () => true } },
        a: { b: { c: { d: ([n]) => n } } },
        ping: () => 'pong' as const,
      },
    });
    const sessionOpened = firstValueFrom(gateway.connected$);
    const client = res.client(url);
    const toasts: string[] = [];
    useContract(client, board, {
      client: {
        confirm: ({ question }) => question.endsWith('?'),
        ui: {
          toast: ({ text }) => {
            toasts.push(text);
            return null;
          },
        },
      },
    });
    await client.opened();
    const api = clientApi(await sessionOpened, board);
    expect(await api.client.confirm({ question: 'ok?' })).toBe(true);
    expect(await api['client.confirm']({ question: 'ok' })).toBe(false);
    expect(await api.client.ui.toast({ text: 'saved' })).toBeNull();
    expect(toasts).toEqual(['saved']);
  });

  it('refuses a handler given twice, a missing one and a stray one, naming it', async () => {
    const { gateway, url } = await res.gateway();
    const methods = {
      chat: () => 'lobby',
      'chat.send': ({ text }: { text: string }) => text.length,
      'chat.room.join': () => true,
      'chat.name': () => 'chat',
      'a.b.c.d': ([n]: [number]) => n,
      ping: () => 'pong' as const,
    };
    expect(() =>
      implementContract(gateway, board, {
        methods: { ...methods, a: { b: { c: { d: methods['a.b.c.d'] } } } } as never,
      }),
    ).toThrow('"a.b.c.d" has two handlers: one under its full name, one nested');
    const { 'chat.room.join': _join, ...withoutJoin } = methods;
    expect(() => implementContract(gateway, board, { methods: withoutJoin as never })).toThrow(
      `The contract's method "chat.room.join" has no handler`,
    );
    const client = res.client(url);
    expect(() =>
      useContract(client, board, {
        client: { confirm: () => true, ui: { toast: () => null, tosat: () => null } },
      } as never),
    ).toThrow('"client.ui.tosat" is not a client method of the contract');
    expect(() =>
      useContract(client, board, {
        client: { confirm: () => true, ui: { toast: () => null } },
        'client.ui.toast': () => null,
      } as never),
    ).toThrow('"client.ui.toast" has two handlers: one under its full name, one nested');
    // Nothing was registered by the refused attempts: registering a name twice would throw.
    implementContract(gateway, board, { methods });
    useContract(client, board, { client: { confirm: () => true, ui: { toast: () => null } } });
    expect(await useContract(client, board).api.chat()).toBe('lobby');
  });

  it('binds any caller: bindMethods nests what it binds', async () => {
    const calls: string[] = [];
    const api = bindMethods(
      { call: (method) => (calls.push(method), Promise.resolve(1)) },
      { 'x.y': {}, 'x.z.w': {} },
    );
    await api.x.y();
    await api.x.z.w();
    await api['x.z.w']();
    expect(calls).toEqual(['x.y', 'x.z.w', 'x.z.w']);
  });
});

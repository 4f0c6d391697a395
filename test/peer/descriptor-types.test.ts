import { describe, it, expect, expectTypeOf, afterEach } from 'vitest';
import { method, notification } from '../../src/peer/method-descriptor.js';
import { cleanup, pair } from './helpers.js';
import type { RpcClient } from '../../src/client/client.js';
import type { Session } from '../../src/server/session.js';

afterEach(cleanup);

/*
 * Compile-time checks: `npx tsc --noEmit -p .` is what runs them. Each
 * `@ts-expect-error` line must be a type error; if the types let it through,
 * tsc reports "Unused '@ts-expect-error' directive" on that line.
 * The bodies are never invoked at run time.
 */

const Subtract = method<[number, number], number>('subtract');
const Progress = notification<{ percent: number }>('progress');

describe('typed descriptors', () => {
  it('give call() the declared result type and the handler the declared params', async () => {
    const { a, b } = pair();
    b.registry.method(Subtract, (params) => {
      expectTypeOf(params).toEqualTypeOf<[number, number]>();
      return params[0] - params[1];
    });
    const result = a.call(Subtract, [10, 4]);
    expectTypeOf(result).toEqualTypeOf<Promise<number>>();
    expect(await result).toBe(6);
  });

  it('reject a handler whose result or params do not match the descriptor', () => {
    const { b } = pair();
    const unused = () => {
      // @ts-expect-error the result must be a number
      b.registry.method(Subtract, () => 'not a number');
      // @ts-expect-error the params are [number, number]
      b.registry.method(Subtract, (p: [string, string]) => p.length);
    };
    expect(typeof unused).toBe('function');
  });

  it('reject notify() params that do not match the descriptor', () => {
    const { a } = pair();
    const unused = () => {
      // @ts-expect-error percent is a number
      a.notify(Progress, { percent: 'x' });
      // @ts-expect-error params are an object, not an array
      a.notify(Progress, [1]);
    };
    expect(typeof unused).toBe('function');
  });

  it('reject call() params that do not match the descriptor', () => {
    const { a } = pair();
    const unused = () => {
      // @ts-expect-error wrong element types everywhere
      void a.call(Subtract, ['a', 'b']);
      // @ts-expect-error the first element must be a number, not a string
      void a.call(Subtract, ['42', 23]);
      // @ts-expect-error two numbers are required, not one
      void a.call(Subtract, [1]);
      // @ts-expect-error two numbers are required, not three
      void a.call(Subtract, [1, 2, 3]);
    };
    expect(typeof unused).toBe('function');
  });
});

describe('typed descriptors on the client and the server session', () => {
  it('reject wrong params on RpcClient.call and Session.call at compile time', () => {
    const unused = (client: RpcClient, session: Session) => {
      expectTypeOf(client.call(Subtract, [1, 2])).toEqualTypeOf<Promise<number>>();
      expectTypeOf(session.call(Subtract, [1, 2])).toEqualTypeOf<Promise<number>>();
      // @ts-expect-error the first element must be a number
      void client.call(Subtract, ['1', 2]);
      // @ts-expect-error two numbers are required
      void session.call(Subtract, [1]);
      // @ts-expect-error percent is a number
      client.notify(Progress, { percent: 'x' });
    };
    expect(typeof unused).toBe('function');
  });
});

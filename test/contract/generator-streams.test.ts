import { firstValueFrom, take, toArray } from 'rxjs';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { useContract } from '../../src/client/contract-client.js';
import { defineContract } from '../../src/contract/contract.js';
import type { HandlerContext } from '../../src/peer/handler-context.js';
import { implementContract } from '../../src/server/contract-server.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { Session } from '../../src/server/session.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

/*
 * A contract's stream written as an async generator: typed by the contract (params, and each
 * yield against the data schema's input), served as an Observable would be.
 */

const res = new Resources();
afterEach(() => res.cleanup());

const feed = defineContract({
  name: 'feed',
  version: '1.0.0',
  methods: {},
  subscriptions: {
    count: {
      params: z.object({ upTo: z.number().int().min(1), label: z.string().default('n') }),
      data: z.object({ label: z.string(), n: z.number() }),
    },
    ticks: { data: z.number() },
  },
});

declare const gateway: Gateway;

/** Type-checked, never run: for definitions whose only point is the compiler's verdict. */
function compileOnly(body: () => unknown): void {
  expect(typeof body).toBe('function');
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('async-generator streams at compile time', () => {
  it('get the typed params and context, and must yield the data type', () => {
    compileOnly(() => {
      implementContract(gateway, feed, {
        methods: {},
        streams: {
          count: async function* (params, ctx) {
            expectTypeOf(params).toEqualTypeOf<{ upTo: number; label: string }>();
            expectTypeOf(ctx).toEqualTypeOf<HandlerContext<Session<unknown>>>();
            for (let n = 1; n <= params.upTo; n++) {
              await sleep(1);
              yield { label: params.label, n };
            }
          },
          ticks: async function* () {
            await sleep(1);
            yield 1;
          },
        },
      });
      implementContract(gateway, feed, {
        methods: {},
        streams: {
          // @ts-expect-error n must be a number
          count: async function* ({ label }) {
            await sleep(1);
            yield { label, n: 'one' };
          },
          // @ts-expect-error ticks yields numbers
          ticks: async function* () {
            await sleep(1);
            yield 'tick';
          },
        },
      });
    });
  });
});

describe('async-generator streams at run time', () => {
  it('each yield is a message; returning completes the subscription', async () => {
    const { gateway, url } = await res.gateway();
    implementContract(gateway, feed, {
      methods: {},
      streams: {
        count: async function* ({ upTo, label }) {
          for (let n = 1; n <= upTo; n++) {
            await sleep(1);
            yield { label, n };
          }
        },
      },
    });
    const { subscribe } = useContract(res.client(url), feed);
    expect(await firstValueFrom(subscribe('count', { upTo: 3 }).pipe(toArray()))).toEqual([
      { label: 'n', n: 1 },
      { label: 'n', n: 2 },
      { label: 'n', n: 3 },
    ]);
  });

  it('when the subscriber leaves, the generator is returned at its next yield (finally runs)', async () => {
    const { gateway, url } = await res.gateway();
    let finished = false;
    implementContract(gateway, feed, {
      methods: {},
      streams: {
        ticks: async function* () {
          try {
            for (let n = 0; ; n++) {
              await sleep(5);
              yield n;
            }
          } finally {
            finished = true;
          }
        },
      },
    });
    const { subscribe } = useContract(res.client(url), feed);
    expect(await firstValueFrom(subscribe('ticks').pipe(take(3), toArray()))).toEqual([0, 1, 2]);
    await waitUntil(() => finished, 'the generator to be returned');
  });
});

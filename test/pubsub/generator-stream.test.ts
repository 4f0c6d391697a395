import { NEVER, firstValueFrom, of, take, tap, throwError, toArray } from 'rxjs';
import type { Observable } from 'rxjs';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { JsonRpcError, ServerError, type Gateway, type StreamHandler } from '../../src/index.js';
import type { HandlerContext } from '../../src/peer/handler-context.js';
import type { Session } from '../../src/server/session.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { rejectionOf } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

/*
 * gateway.stream with an `async function*` handler (no contract): the StreamHandler type admits
 * async iterables, and the service streams the generator's yields to the subscriber and returns
 * the generator when the subscriber leaves.
 */

const res = new Resources();
afterEach(() => res.cleanup());

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

declare const gateway: Gateway<{ user: string }>;

/** Type-checked, never run: for definitions whose only point is the compiler's verdict. */
function compileOnly(body: () => unknown): void {
  expect(typeof body).toBe('function');
}

describe('StreamHandler at compile time', () => {
  it('admits an async generator function, an async iterable and a promise of one', () => {
    compileOnly(() => {
      gateway.stream('count', async function* ({ upTo }: { upTo: number }, ctx) {
        expectTypeOf(ctx).toEqualTypeOf<HandlerContext<Session<{ user: string }>>>();
        for (let n = 1; n <= upTo; n++) {
          await sleep(1);
          yield n;
        }
      });
      const iterable: AsyncIterable<string> = (async function* () {
        await sleep(1);
        yield 'a';
      })();
      gateway.stream('iterable', () => iterable);
      gateway.stream('later', () => Promise.resolve(iterable));
      gateway.stream('observable', () => of(1));
      gateway.stream('later-observable', () => Promise.resolve(of(1)));
    });
  });

  it('types the yields by T, and refuses what is neither an Observable nor an async iterable', () => {
    expectTypeOf<StreamHandler<unknown, { upTo: number }, number>>().toBeCallableWith(
      { upTo: 1 },
      {} as HandlerContext<Session<unknown>>,
    );
    type Returned = ReturnType<StreamHandler<unknown, unknown, number>>;
    expectTypeOf<AsyncGenerator<number, void>>().toMatchTypeOf<Returned>();
    expectTypeOf<Observable<number>>().toMatchTypeOf<Returned>();
    expectTypeOf<Promise<AsyncIterable<number>>>().toMatchTypeOf<Returned>();
    expectTypeOf<AsyncGenerator<string, void>>().not.toMatchTypeOf<Returned>();
    expectTypeOf<number[]>().not.toMatchTypeOf<Returned>();
    compileOnly(() => {
      gateway.stream<unknown, number>(
        'numbers',
        // @ts-expect-error the stream's messages are numbers
        async function* () {
          await sleep(1);
          yield 'one';
        },
      );
      // @ts-expect-error a plain value is no stream
      gateway.stream('value', () => 1);
    });
  });
});

describe('an async generator stream at run time', () => {
  it('sends each yield, and completes the subscription when the generator returns', async () => {
    const { gateway, url } = await res.gateway();
    gateway.stream('count', async function* ({ upTo }: { upTo: number }) {
      for (let n = 1; n <= upTo; n++) {
        await sleep(1);
        yield { n };
      }
    });
    const client = res.client(url);
    expect(await firstValueFrom(client.subscribe('count', { upTo: 3 }).pipe(toArray()))).toEqual([
      { n: 1 },
      { n: 2 },
      { n: 3 },
    ]);
  });

  it('stops when the subscriber unsubscribes: finally runs, the session holds nothing', async () => {
    const { gateway, url } = await res.gateway();
    let finished = 0;
    gateway.stream('ticks', async function* () {
      try {
        for (let n = 0; ; n++) {
          await sleep(5);
          yield n;
        }
      } finally {
        finished++;
      }
    });
    const before = sessionIds(gateway);
    const client = res.client(url);
    await client.opened();
    await waitUntil(() => gateway.sessions.size > before.size, 'the session to open');
    const session = newSession(gateway, before);

    expect(
      await firstValueFrom(client.subscribe<number>('ticks').pipe(take(3), toArray())),
    ).toEqual([0, 1, 2]);
    await waitUntil(() => finished === 1, 'the generator to be returned');
    expect(gateway.pubsub.subscriptionCount(session)).toBe(0);
  });

  it('stops when the connection closes', async () => {
    const { gateway, url } = await res.gateway();
    let finished = false;
    let started = false;
    gateway.stream('ticks', async function* () {
      try {
        for (let n = 0; ; n++) {
          started = true;
          await sleep(5);
          yield n;
        }
      } finally {
        finished = true;
      }
    });
    const client = res.client(url);
    const sub = client.subscribe<number>('ticks').subscribe();
    await waitUntil(() => started, 'the generator to start');
    await client.close();
    sub.unsubscribe();
    await waitUntil(() => finished, 'the generator to be returned');
  });

  it('a throw ends the subscription with the error', async () => {
    const { gateway, url } = await res.gateway();
    gateway.stream('failing', async function* () {
      await sleep(1);
      yield 1;
      throw new ServerError(-32050, 'feed gone');
    });
    const client = res.client(url);
    const seen: number[] = [];
    const err = await rejectionOf(
      firstValueFrom(
        client.subscribe<number>('failing').pipe(
          tap((n) => seen.push(n)),
          toArray(),
        ),
      ),
    );
    expect(seen).toEqual([1]);
    expect(err).toBeInstanceOf(JsonRpcError);
    expect((err as JsonRpcError).code).toBe(-32050);
    expect((err as JsonRpcError).message).toBe('feed gone');
  });
});

describe("a stream handler's signal lives as long as the stream", () => {
  it('aborts on unsubscribe: a generator awaiting it ends at once, without another yield', async () => {
    const { gateway, url } = await res.gateway();
    let finished = 0;
    gateway.stream('waits', async function* (_params: unknown, ctx) {
      try {
        yield 'first';
        // Nothing else ever comes: only the signal ends this wait.
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
      } finally {
        finished++;
      }
    });
    const client = res.client(url);
    expect(await firstValueFrom(client.subscribe<string>('waits'))).toBe('first');
    await waitUntil(() => finished === 1, "the generator's finally");
  });

  it('aborts when the stream completes, fails or its connection closes, and not before', async () => {
    const { gateway, url } = await res.gateway();
    const signals = new Map<string, AbortSignal>();
    gateway.stream('kinds', (kind: string, ctx) => {
      signals.set(kind, ctx.signal);
      if (kind === 'fails') return throwError(() => new ServerError(-32050, 'gone'));
      if (kind === 'completes') return of(1);
      return NEVER;
    });
    const client = res.client(url);
    await firstValueFrom(client.subscribe('kinds', 'completes'));
    await rejectionOf(firstValueFrom(client.subscribe('kinds', 'fails')));
    const open = client.subscribe('kinds', 'open').subscribe();
    await waitUntil(() => signals.has('open'), 'the open stream');
    await waitUntil(
      () => signals.get('completes')!.aborted && signals.get('fails')!.aborted,
      'the ended streams to abort their signals',
    );
    expect(signals.get('open')!.aborted).toBe(false);

    await client.close();
    open.unsubscribe();
    await waitUntil(() => signals.get('open')!.aborted, 'the closed connection to abort it');
  });

  it('aborts when the connection closes while an async handler is still building the stream', async () => {
    const { gateway, url } = await res.gateway();
    let signal: AbortSignal | undefined;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    gateway.stream('slow', async (_params: unknown, ctx) => {
      signal = ctx.signal;
      await released;
      return of(1);
    });
    const client = res.client(url);
    const sub = client.subscribe('slow').subscribe({ error: () => undefined });
    await waitUntil(() => signal !== undefined, 'the handler to run');
    await client.close();
    sub.unsubscribe();
    await waitUntil(() => signal!.aborted, 'the signal to abort');
    release();
  });
});

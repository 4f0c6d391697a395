import { concat, firstValueFrom, of, take, throwError, toArray } from 'rxjs';
import type { Observable, Subscription } from 'rxjs';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { useContract } from '../../src/client/contract-client.js';
import { defineContract } from '../../src/contract/contract.js';
import { InternalError, ServerError } from '../../src/protocol/errors.js';
import type { JsonRpcError } from '../../src/protocol/errors.js';
import { contractEvents, implementContract } from '../../src/server/contract-server.js';
import type { ImplementOptions } from '../../src/server/contract-server.js';
import type { Session } from '../../src/server/session.js';
import { captureLogger } from '../support/logging.js';
import { Resources } from '../support/resources.js';
import { rejectionOf } from '../support/promises.js';
import { waitUntil } from '../support/waiting.js';

/*
 * What the server pushes (notifications, topic messages) against the contract: typed and,
 * in debug mode, checked on the server; normalised and parsed on the client.
 */

const res = new Resources();
const subscriptions: Subscription[] = [];
afterEach(async () => {
  for (const s of subscriptions.splice(0)) s.unsubscribe();
  await res.cleanup();
});

const news = defineContract({
  name: 'news',
  version: '1.0.0',
  methods: { ping: { result: z.literal('pong') } },
  notifications: {
    progress: {
      params: z.object({ percent: z.number(), label: z.string().default('') }),
      paramOrder: ['percent', 'label'],
    },
    /** No params schema: takes none. */
    done: {},
  },
  subscriptions: {
    clock: { data: z.object({ at: z.number().default(0) }) },
  },
});

const message = expect.stringMatching(/\S/);

async function newsGateway(options: ImplementOptions = {}) {
  const running = await res.gateway();
  implementContract(running.gateway, news, { methods: { ping: () => 'pong' as const } });
  const events = contractEvents(running.gateway, news, options);
  const sessionOpened = firstValueFrom(running.gateway.connected$);
  const { logger, records } = captureLogger();
  const client = res.client(running.url);
  const bound = useContract(client, news, undefined, { logger });
  await client.opened();
  const session = await sessionOpened;
  return {
    ...running,
    events,
    bound,
    session,
    /** What the client warned, so far. */
    warnings: () => records.filter((r) => r.level === 'warn').map(({ obj, msg }) => ({ obj, msg })),
  };
}

describe('notifications on the client (useContract)', () => {
  it('arrive mapped onto names (paramOrder) and parsed with the schema', async () => {
    const { bound, session, events } = await newsGateway();
    const progress = bound.notifications('progress');
    expectTypeOf(progress).toEqualTypeOf<Observable<{ percent: number; label: string }>>();
    const two = firstValueFrom(progress.pipe(take(2), toArray()));
    session.notify('progress', [50]);
    events.notify(session, 'progress', { percent: 60, label: 'b' });
    expect(await two).toStrictEqual([
      { percent: 50, label: '' },
      { percent: 60, label: 'b' },
    ]);
  });

  it('that do not match the contract are dropped, with a warning', async () => {
    const { bound, session, warnings } = await newsGateway();
    const progress = firstValueFrom(bound.notifications('progress'));
    const done = firstValueFrom(bound.notifications('done'));
    // Sent in order on one socket: the bad ones are dropped, the good ones come through.
    session.notify('progress', { percent: 'x' });
    session.notify('progress', [1, 'a', 'extra']);
    session.notify('done', { evil: 1 });
    session.notify('progress', { percent: 70 });
    session.notify('done');
    expect(await progress).toStrictEqual({ percent: 70, label: '' });
    expect(await done).toBeUndefined();
    expect(warnings()).toStrictEqual([
      {
        obj: { notification: 'progress', issues: [{ path: ['percent'], message }] },
        msg: 'notification does not match the contract: dropped',
      },
      {
        obj: {
          notification: 'progress',
          issues: [{ path: [], message: 'Expected at most 2 positional params, got 3' }],
        },
        msg: 'notification does not match the contract: dropped',
      },
      {
        obj: { notification: 'done', issues: [{ path: [], message: 'Expected no params' }] },
        msg: 'notification does not match the contract: dropped',
      },
    ]);
  });
});

describe('subscription messages on the client (useContract)', () => {
  it('are parsed with the data schema; one that does not match errors the Observable', async () => {
    const { gateway, bound, events } = await newsGateway();
    const clock = bound.subscribe('clock');
    expectTypeOf(clock).toEqualTypeOf<Observable<{ at: number }>>();
    const got: unknown[] = [];
    const failed = new Promise<unknown>((resolve) =>
      subscriptions.push(clock.subscribe({ next: (v) => got.push(v), error: resolve })),
    );
    await waitUntil(() => gateway.pubsub.topics()['clock'] === 1, 'the server subscription');

    await events.publish('clock', {});
    await waitUntil(() => got.length === 1, 'the first message');
    expect(got).toStrictEqual([{ at: 0 }]);

    await gateway.publish('clock', { at: 'noon' });
    const error = await failed;
    expect(error).toBeInstanceOf(InternalError);
    expect((error as JsonRpcError).code).toBe(-32603);
    expect((error as JsonRpcError).message).toBe('Subscription data does not match the contract');
    expect((error as JsonRpcError).data).toStrictEqual({
      subscription: 'clock',
      issues: [{ path: ['at'], message }],
    });
    expect(got).toHaveLength(1);
    // The error ended the subscription, on the server too.
    await waitUntil(() => !gateway.pubsub.topics()['clock'], 'the server unsubscribe');
  });
});

describe('contractEvents on the server', () => {
  it('debug mode (validateResults): a notification off the contract throws -32603, nothing sent', async () => {
    const { bound, session, events } = await newsGateway({ validateResults: true });
    const progress = firstValueFrom(bound.notifications('progress'));
    let thrown: unknown;
    try {
      events.notify(session, 'progress', { percent: 'x' } as never);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(InternalError);
    expect((thrown as JsonRpcError).data).toStrictEqual({
      notification: 'progress',
      issues: [{ path: ['percent'], message }],
    });
    // Positional params are checked as the client will read them.
    events.notify(session, 'progress', [80]);
    expect(await progress).toStrictEqual({ percent: 80, label: '' });
  });

  it('debug mode: publishing data off the contract rejects -32603 and publishes nothing', async () => {
    const { gateway, bound, events } = await newsGateway({ validateResults: true });
    const got: unknown[] = [];
    subscriptions.push(bound.subscribe('clock').subscribe((v) => got.push(v)));
    await waitUntil(() => gateway.pubsub.topics()['clock'] === 1, 'the server subscription');
    const error = await rejectionOf(events.publish('clock', { at: 'noon' } as never));
    expect(error).toBeInstanceOf(InternalError);
    expect((error as JsonRpcError).data).toStrictEqual({
      topic: 'clock',
      issues: [{ path: ['at'], message }],
    });
    expect(typeof (await events.publish('clock', { at: 5 }))).toBe('number');
    await waitUntil(() => got.length === 1, 'the message');
    expect(got).toStrictEqual([{ at: 5 }]);
  });

  it('without debug mode, sends what it is given', async () => {
    const { bound, session, events, warnings } = await newsGateway();
    subscriptions.push(bound.notifications('progress').subscribe());
    expect(() => events.notify(session, 'progress', { percent: 'x' } as never)).not.toThrow();
    // It went out: the client is the one that drops it.
    await waitUntil(() => warnings().length === 1, 'the client to drop it');
    expect(typeof (await events.publish('clock', { at: 'noon' } as never))).toBe('number');
  });

  it('types notify and publish by the contract', () => {
    const compileOnly = (body: () => unknown) => expect(typeof body).toBe('function');
    compileOnly(() => {
      const events = contractEvents(null as never, news);
      const session = null as unknown as Session;
      events.notify(session, 'progress', { percent: 1 });
      events.notify(session, 'progress', [1, 'a']);
      events.notify(session, 'done');
      void events.publish('clock', {});
      void events.publish('clock', { at: 1 });
      // @ts-expect-error percent is a number
      events.notify(session, 'progress', { percent: 'x' });
      // @ts-expect-error progress needs its params
      events.notify(session, 'progress');
      // @ts-expect-error by position: [percent, label]
      events.notify(session, 'progress', ['x']);
      // @ts-expect-error nope is not a notification of the contract
      events.notify(session, 'nope', {});
      // @ts-expect-error at is a number
      void events.publish('clock', { at: 'noon' });
      // @ts-expect-error nope is not a subscription of the contract
      void events.publish('nope', {});
    });
  });
});

describe('async schemas, in order and without loose ends', () => {
  const slow = defineContract({
    name: 'slow',
    version: '1.0.0',
    methods: {},
    notifications: {
      tick: { params: z.object({ n: z.number() }).refine(async () => Promise.resolve(true)) },
    },
    subscriptions: {
      feed: { data: z.number().refine(async () => Promise.resolve(true)) },
    },
  });

  it('a stream error waits behind the messages still being parsed', async () => {
    const { gateway, url } = await res.gateway();
    gateway.stream('feed', () =>
      concat(
        of(3, 2, 1),
        throwError(() => new ServerError(-32000, 'feed failed')),
      ),
    );
    const client = res.client(url);
    const bound = useContract(client, slow);
    const got: unknown[] = [];
    const failed = new Promise<unknown>((resolve) =>
      subscriptions.push(
        bound.subscribe('feed').subscribe({ next: (v) => got.push(v), error: resolve }),
      ),
    );
    const error = await failed;
    expect(got).toStrictEqual([3, 2, 1]);
    expect((error as JsonRpcError).message).toBe('feed failed');
  });

  it('debug mode: a notification whose session closes during an async check is logged, not thrown', async () => {
    const { logger, records } = captureLogger();
    const { gateway, url } = await res.gateway({ logger });
    const events = contractEvents(gateway, slow, { validateResults: true });
    const sessionOpened = firstValueFrom(gateway.connected$);
    const client = res.client(url);
    await client.opened();
    const session = await sessionOpened;
    events.notify(session, 'tick', { n: 1 });
    session.close(1000, 'bye'); // before the async check ends
    const errors = () => records.filter((r) => r.level === 'error');
    await waitUntil(() => errors().length === 1, 'the log line');
    expect(errors()[0]).toMatchObject({ msg: 'notification not sent' });
  });
});

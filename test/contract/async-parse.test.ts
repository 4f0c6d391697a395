import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Subscription } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_PARSE_BACKLOG, useContract } from '../../src/client/contract-client.js';
import { defineContract } from '../../src/contract/contract.js';
import { InternalError } from '../../src/protocol/errors.js';
import { implementContract } from '../../src/server/contract-server.js';
import { captureLogger } from '../support/logging.js';
import { deferred } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { waitFor } from '../support/waiting.js';

/*
 * useContract with an async schema whose parse of one value the test holds: what arrives behind
 * it keeps its order, waits within MAX_PARSE_BACKLOG, and nothing is delivered once unsubscribed.
 */

const res = new Resources();
const subscriptions: Subscription[] = [];
afterEach(async () => {
  for (const s of subscriptions.splice(0)) s.unsubscribe();
  await res.cleanup();
});

/**
 * An async schema of numbers (a notification's as `{ n }`): the parse of `held` waits for
 * `release`; the others resolve at once.
 */
function gated(held: number) {
  const gate = deferred();
  const parsed: unknown[] = [];
  const schema: StandardSchemaV1<number> = {
    '~standard': {
      version: 1,
      vendor: 'test',
      validate: async (value) => {
        const n = typeof value === 'number' ? value : (value as { n: number }).n;
        parsed.push(n);
        if (n === held) await gate.promise;
        return { value: n };
      },
    },
  };
  return { schema, parsed, release: () => gate.resolve() };
}

async function setup(held: number) {
  const { schema, parsed, release } = gated(held);
  const contract = defineContract({
    name: 'gated',
    version: '1.0.0',
    methods: {},
    notifications: { tick: { params: schema } },
    subscriptions: { feed: { data: schema } },
  });
  const { gateway, url } = await res.gateway();
  gateway.topic('feed');
  const client = res.client(url);
  const { logger, records } = captureLogger();
  const bound = useContract(client, contract, undefined, { logger });
  // Beside the contract's: sees each message as the client reads it, so the test knows what
  // waits behind the held parse.
  const read: unknown[] = [];
  subscriptions.push(client.subscribe('feed').subscribe((v) => read.push(v)));
  await client.opened();
  await waitFor(() => gateway.pubsub.topics()['feed'] === 1, 'the subscription');
  return { gateway, client, bound, parsed, release, read, records };
}

/** Every promise callback already queued has run (the parse chain is promises alone). */
const drained = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('useContract with an async schema', () => {
  it('a slow parse of message 1 and fast ones after it: delivered 1, 2, 3', async () => {
    const { gateway, bound, parsed, release, read } = await setup(1);
    const got: unknown[] = [];
    subscriptions.push(bound.subscribe('feed').subscribe((v) => got.push(v)));
    for (const n of [1, 2, 3]) await gateway.publish('feed', n);
    await waitFor(() => read.length === 3, 'the three messages read');
    expect(parsed).toEqual([1]);
    expect(got).toEqual([]);
    release();
    await waitFor(() => got.length === 3, 'the three messages parsed');
    expect(got).toEqual([1, 2, 3]);
  });

  it('unsubscribed during a parse: nothing more is delivered or parsed', async () => {
    const { gateway, bound, parsed, release, read } = await setup(1);
    const got: unknown[] = [];
    const sub = bound.subscribe('feed').subscribe((v) => got.push(v));
    for (const n of [1, 2]) await gateway.publish('feed', n);
    await waitFor(() => read.length === 2, 'the two messages read');
    sub.unsubscribe();
    release();
    await drained();
    expect(got).toEqual([]);
    expect(parsed).toEqual([1]);
  });

  it(`a subscription: at most ${MAX_PARSE_BACKLOG} messages wait behind a parse; past it, after them, the Observable errors -32603`, async () => {
    const { gateway, bound, release, read } = await setup(0);
    const got: unknown[] = [];
    let error: unknown;
    subscriptions.push(
      bound.subscribe('feed').subscribe({
        next: (v) => got.push(v),
        error: (e: unknown) => void (error = e),
      }),
    );
    const total = MAX_PARSE_BACKLOG + 2; // the held one, the backlog, and one more
    for (let n = 0; n < total; n++) void gateway.publish('feed', n);
    await waitFor(() => read.length === total, 'every message read');
    expect(got).toEqual([]);
    expect(error).toBeUndefined();
    release();
    await waitFor(() => error !== undefined || got.length === total, 'the error');
    // Every message but the one past the bound, then the word about it.
    expect(got).toEqual(Array.from({ length: total - 1 }, (_, n) => n));
    expect(error).toBeInstanceOf(InternalError);
    expect((error as InternalError).message).toBe(
      'Subscription messages come faster than its data schema parses them',
    );
    expect((error as InternalError).data).toEqual({
      subscription: 'feed',
      limit: MAX_PARSE_BACKLOG,
    });
  });

  it(`notifications: past ${MAX_PARSE_BACKLOG} waiting, one is dropped with a warning naming the bound`, async () => {
    const { gateway, client, bound, release, records } = await setup(0);
    const got: unknown[] = [];
    subscriptions.push(bound.notifications('tick').subscribe((v) => got.push(v)));
    const read: unknown[] = [];
    subscriptions.push(client.notificationsOf('tick').subscribe((v) => read.push(v)));
    const [session] = gateway.sessions.values();
    const total = MAX_PARSE_BACKLOG + 2;
    for (let n = 0; n < total; n++) session!.notify('tick', { n });
    await waitFor(() => read.length === total, 'every notification read');
    expect(records.filter((r) => r.level === 'warn').map(({ obj, msg }) => ({ obj, msg }))).toEqual(
      [
        {
          obj: { notification: 'tick', limit: MAX_PARSE_BACKLOG },
          msg: 'notification dropped: too many waiting for its schema',
        },
      ],
    );
    release();
    await waitFor(() => got.length === total - 1, 'the rest parsed');
    expect(got).toEqual(Array.from({ length: total - 1 }, (_, n) => n));
  });
});

describe('useContract with a schema whose parse is a thenable, not a native promise', () => {
  it("a call's params and result and each message are the parsed values, in order", async () => {
    // A schema library's own thenable: `then` calls back later and returns nothing.
    const schema: StandardSchemaV1<number> = {
      '~standard': {
        version: 1,
        vendor: 'test',
        validate: (value) =>
          ({
            then(onParsed: (result: StandardSchemaV1.Result<number>) => void) {
              setImmediate(() => onParsed({ value: (value as number) * 10 }));
            },
          }) as unknown as Promise<StandardSchemaV1.Result<number>>,
      },
    };
    const contract = defineContract({
      name: 'thenable',
      version: '1.0.0',
      methods: { one: { result: schema } },
      subscriptions: { feed: { data: schema } },
    });
    const byName: StandardSchemaV1<{ n: number }> = {
      '~standard': {
        version: 1,
        vendor: 'test',
        validate: (value) =>
          ({
            then(onParsed: (result: StandardSchemaV1.Result<{ n: number }>) => void) {
              setImmediate(() => onParsed({ value: { n: (value as { n: number }).n * 10 } }));
            },
          }) as unknown as Promise<StandardSchemaV1.Result<{ n: number }>>,
      },
    };
    const served = defineContract({
      name: 'thenable-params',
      version: '1.0.0',
      methods: { tenfold: { params: byName, result: schema } },
    });
    const { gateway, url } = await res.gateway();
    gateway.method('one', () => 1);
    gateway.topic('feed');
    // The server side: params parsed by the thenable reach the handler (its result is checked
    // against the schema and sent as the handler gave it).
    implementContract(gateway, served, { methods: { tenfold: ({ n }) => n } });
    const client = res.client(url);
    const bound = useContract(client, contract);
    expect(await bound.api.one()).toBe(10);
    expect(await client.call('tenfold', { n: 2 })).toBe(20);
    const got: unknown[] = [];
    subscriptions.push(bound.subscribe('feed').subscribe((v) => got.push(v)));
    await waitFor(() => gateway.pubsub.topics()['feed'] === 1, 'the subscription');
    for (const n of [1, 2, 3]) await gateway.publish('feed', n);
    await waitFor(() => got.length === 3, 'the three messages parsed');
    expect(got).toEqual([10, 20, 30]);
  });
});

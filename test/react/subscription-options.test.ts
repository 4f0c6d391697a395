// @vitest-environment happy-dom
/**
 * The buffer of messages waiting for an async parse (createHooks with a schema that parses
 * asynchronously): a slow parse and a fast topic hold at most `bufferSize` messages. With
 * 'drop-oldest' the oldest waiting are never parsed and are counted in `dropped`; with 'error'
 * the subscription ends with BufferOverflowError. Options it cannot use (a bufferSize below 1,
 * a history that is not a number) are refused by name.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { act, cleanup, screen } from '@testing-library/react';
import { createElement } from 'react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BufferOverflowError } from '../../src/client/async-iterate.js';
import { defineContract } from '../../src/contract/contract.js';
import { createHooks, useSubscription as usePlainSubscription } from '../../src/react/index.js';
import type { UseSubscriptionOptions, UseSubscriptionResult } from '../../src/react/index.js';
import { resolveSubscriptionOptions } from '../../src/react/subscription-options.js';
import { Resources } from '../support/resources.js';
import { waitFor as waitUntil } from '../support/waiting.js';
import { renderWith } from './harness.js';

const res = new Resources();
afterEach(async () => {
  cleanup();
  await res.cleanup();
});

/** Let React render what the store changed. */
const flush = () => act(() => Promise.resolve());

interface Tick {
  n: number;
}

/** A schema whose parse waits for `open()`: every message it was asked to parse, in order. */
function slowSchema() {
  const parsed: number[] = [];
  let open = (): void => undefined;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const schema: StandardSchemaV1<Tick, Tick> = {
    '~standard': {
      version: 1,
      vendor: 'test',
      validate: async (value) => {
        parsed.push((value as Tick).n);
        await gate;
        return { value: value as Tick };
      },
    },
  };
  return { schema, parsed, open };
}

async function setup() {
  const slow = slowSchema();
  const contract = defineContract({
    name: 'ticks',
    version: '1.0.0',
    methods: {},
    subscriptions: { ticks: { data: slow.schema } },
  });
  const { useSubscription } = createHooks(contract);
  const { url, gateway } = await res.gateway();
  gateway.topic('ticks');
  const client = res.client(url);
  // Another observer of the same wire subscription: it tells when a message reached the client.
  let received = 0;
  client.subscribe('ticks').subscribe(() => received++);
  await waitUntil(() => gateway.sessions.size === 1, 'the session');
  let shown: UseSubscriptionResult<Tick> | undefined;
  const render = (options: UseSubscriptionOptions) => {
    function Ticks() {
      shown = useSubscription('ticks', undefined, options);
      return createElement('p', { 'data-testid': 'ticks' }, shown.status.state);
    }
    renderWith(client, createElement(Ticks));
  };
  /** Publish `from`..`to` and wait until the client has each. */
  const publish = async (from: number, to: number) => {
    for (let n = from; n <= to; n++) await gateway.publish('ticks', { n });
    await waitUntil(() => received === to + 1, `message ${to} at the client`);
  };
  return {
    ...slow,
    render,
    publish,
    shown: () => shown!,
    textOf: () => screen.getByTestId('ticks').textContent,
  };
}

describe('useSubscription with an async parse', () => {
  it("holds at most bufferSize messages for a slow parse, dropping the oldest and counting them in 'dropped'", async () => {
    const t = await setup();
    t.render({ bufferSize: 3 });
    await waitUntil(() => t.textOf() === 'subscribed', 'subscribed');
    // 0 is being parsed; 1..10 arrive behind it: 1..7 are dropped, 8, 9, 10 wait.
    await t.publish(0, 10);
    await flush(); // the render of what the messages changed
    expect(t.parsed).toEqual([0]);
    const droppedBeforeTheParse = t.shown().dropped;
    t.open();
    await flush();
    await waitUntil(() => t.shown().data?.n === 10, 'the last message shown');
    expect(t.parsed).toEqual([0, 8, 9, 10]);
    // Counted as they were dropped, not once the parse caught up.
    expect(droppedBeforeTheParse).toBe(7);
    expect(t.shown().dropped).toBe(7);
    expect(t.shown().status.state).toBe('subscribed');
  });

  it("ends the subscription with BufferOverflowError when the buffer is full with overflow: 'error'", async () => {
    const t = await setup();
    t.render({ bufferSize: 2, overflow: 'error' });
    await waitUntil(() => t.textOf() === 'subscribed', 'subscribed');
    await t.publish(0, 2); // 0 parsing, 1 and 2 waiting: full, not over
    expect(t.shown().status.state).toBe('subscribed');
    await t.publish(3, 3);
    await flush();
    expect(t.textOf()).toBe('error');
    const error = t.shown().error;
    expect(error).toBeInstanceOf(BufferOverflowError);
    expect(error).toMatchObject({ bufferSize: 2 });
    expect((error as Error).message).toMatch(/^useSubscription:/);
    // The messages waiting, and the one being parsed, are not shown once it ended.
    t.open();
    await flush();
    expect(t.shown().data).toBeUndefined();
    expect(t.parsed).toEqual([0]);
    expect(t.shown().status.state).toBe('error');
  });
});

describe("useSubscription's options", () => {
  const resolve = (options: UseSubscriptionOptions) =>
    resolveSubscriptionOptions(options.history, options.bufferSize, options.overflow);

  it('refuses a bufferSize or overflow it cannot use, naming it; defaults as iterate', () => {
    expect(() => resolve({ bufferSize: 0 })).toThrow(
      new RangeError('bufferSize must be an integer at least 1, not 0'),
    );
    expect(() => resolve({ bufferSize: 1.5 })).toThrow(RangeError);
    expect(() => resolve({ overflow: 'drop-newest' as never })).toThrow(
      /overflow must be "drop-oldest" or "error"/,
    );
    expect(resolve({})).toEqual({
      window: 0,
      buffer: { bufferSize: 1_000, overflow: 'drop-oldest' },
    });
  });

  it('takes history as a count (fractions floored, below 0 none) and refuses one that is not a number', () => {
    expect(resolve({ history: 2.7 }).window).toBe(2);
    expect(resolve({ history: -3 }).window).toBe(0);
    expect(resolve({ history: Infinity }).window).toBe(Infinity);
    expect(() => resolve({ history: '5' as never })).toThrow(TypeError);
  });

  it('throws while rendering at history: NaN, which would otherwise keep every message', async () => {
    const { url } = await res.gateway();
    const client = res.client(url);
    function Feed() {
      usePlainSubscription('feed', undefined, { history: Number('a few') });
      return null;
    }
    const quiet = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      expect(() => renderWith(client, createElement(Feed))).toThrow(
        new TypeError('history must be a number, not NaN'),
      );
    } finally {
      quiet.mockRestore();
    }
  });
});

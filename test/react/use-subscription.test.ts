// @vitest-environment happy-dom
/**
 * useSubscription against a real gateway on loopback (a Node client over `ws` inside
 * happy-dom): the status through a lost connection (connecting, subscribed, resuming,
 * subscribed) and a gap, the latest message and the history window, one wire subscribe for
 * StrictMode's double mount and for two components, the unsubscribe when the last one
 * unmounts, reset, a refused subscribe, params JSON cannot carry, and a client made by
 * createSharedClient.
 */
import { act, cleanup, screen } from '@testing-library/react';
import { createElement } from 'react';
import { afterEach, describe, expect, it } from 'vitest';
import { JsonRpcError } from '../../src/protocol/errors.js';
import type { Gateway } from '../../src/server/gateway.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { useSubscription } from '../../src/react/index.js';
import { READ_ATTEMPTS } from '../../src/server/pubsub-resume.js';
import type { UseSubscriptionResult } from '../../src/react/index.js';
import type { RpcClient } from '../../src/client/client.js';
import { Resources } from '../support/resources.js';
import { SharedTabs } from '../support/shared-tabs.js';
import { waitFor as waitUntil } from '../support/waiting.js';
import { methodLog, recorder, renderWith } from './harness.js';

const res = new Resources();
const tabs = new SharedTabs();
afterEach(async () => {
  cleanup();
  await tabs.cleanup();
  await res.cleanup();
});

async function setup(broker = new MemoryBroker()) {
  const log = methodLog();
  const { url, gateway } = await res.gateway({ broker, middleware: log.middleware });
  gateway.topic('feed');
  return { log, gateway, url, client: res.client(url) };
}

/** "subscribed 7 [5,6,7]": the state, the latest message and the history. */
function show(sub: UseSubscriptionResult<unknown>): string {
  const { status, data, history } = sub;
  return `${status.state} ${JSON.stringify(data)} ${JSON.stringify(history)}`;
}

/** A component that shows `feed` with a window of `history`, recording each state it renders. */
function feedView(states: { record: (state: string) => void }, history = 0, id = 'feed') {
  return function Feed() {
    const sub = useSubscription('feed', undefined, { history });
    states.record(sub.status.state);
    return createElement('p', { 'data-testid': id }, show(sub));
  };
}

const textOf = (id = 'feed') => screen.getByTestId(id).textContent;

/** Closes every session of the gateway from the server: the client reconnects and resumes. */
function dropConnections(gateway: Gateway): void {
  for (const session of gateway.sessions.values()) session.close(1012, 'restart');
}

describe('useSubscription', () => {
  it('goes connecting, subscribed, resuming, subscribed through a lost connection', async () => {
    const { gateway, client } = await setup();
    const states = recorder<string>();
    renderWith(client, createElement(feedView(states, 2)));
    await waitUntil(() => textOf() === 'subscribed undefined []', 'subscribed');
    await gateway.publish('feed', 'a');
    await waitUntil(() => textOf() === 'subscribed "a" ["a"]', 'the first message');

    dropConnections(gateway);
    await waitUntil(() => states.values.includes('resuming'), 'resuming');
    await waitUntil(() => textOf().startsWith('subscribed'), 'subscribed again');
    await gateway.publish('feed', 'b');
    await waitUntil(() => textOf() === 'subscribed "b" ["a","b"]', 'the next message');
    expect(states.values).toEqual(['connecting', 'subscribed', 'resuming', 'subscribed']);
  });

  it('shows a gap until the next message', async () => {
    /**
     * A memory broker whose next history reads fail, as many as a resume makes before it gives
     * up on history (the link being up): the resume says gap of unknown size.
     */
    class FlakyHistory extends MemoryBroker {
      failNext = false;
      private failing = 0;
      override history(topic: string, afterSeq: number) {
        if (this.failNext) {
          this.failNext = false;
          this.failing = READ_ATTEMPTS;
        }
        if (this.failing === 0) return super.history(topic, afterSeq);
        this.failing--;
        return Promise.reject(new Error('history unavailable'));
      }
    }
    const broker = new FlakyHistory();
    const { gateway, client } = await setup(broker);
    const states = recorder<string>();
    renderWith(client, createElement(feedView(states)));
    await waitUntil(() => textOf().startsWith('subscribed'), 'subscribed');
    await gateway.publish('feed', 1);
    await waitUntil(() => textOf() === 'subscribed 1 []', 'the first message');

    broker.failNext = true;
    dropConnections(gateway);
    await waitUntil(() => textOf() === 'gap 1 []', 'the gap');
    await gateway.publish('feed', 2);
    await waitUntil(() => textOf() === 'subscribed 2 []', 'the message after the gap');
    // The resume's reply may render before the gap (its reads are retried over a few turns).
    expect(states.values.slice(0, 3)).toEqual(['connecting', 'subscribed', 'resuming']);
    expect(states.values.slice(-2)).toEqual(['gap', 'subscribed']);
    expect(states.values.length).toBeLessThanOrEqual(6);
  });

  it('keeps the last N messages in history, and the latest in data', async () => {
    const { gateway, client } = await setup();
    const states = recorder<string>();
    renderWith(
      client,
      createElement(
        'div',
        null,
        createElement(feedView(states, 3, 'three')),
        createElement(feedView(states, 1, 'one')),
      ),
    );
    await waitUntil(() => textOf('three').startsWith('subscribed'), 'subscribed');
    for (const n of [1, 2, 3, 4, 5]) await gateway.publish('feed', n);
    await waitUntil(() => textOf('three') === 'subscribed 5 [3,4,5]', 'five messages');
    expect(textOf('one')).toBe('subscribed 5 [5]');
  });

  it('makes one wire subscription for StrictMode and two components; the last unmount unsubscribes', async () => {
    const { gateway, client, log } = await setup();
    const states = recorder<string>();
    const view = renderWith(
      client,
      createElement(
        'div',
        null,
        createElement(feedView(states, 0, 'a')),
        createElement(feedView(states, 0, 'b')),
      ),
      true,
    );
    await waitUntil(() => textOf('a').startsWith('subscribed'), 'subscribed');
    await gateway.publish('feed', 'both');
    await waitUntil(() => textOf('a') === 'subscribed "both" []', 'the message in a');
    expect(textOf('b')).toBe('subscribed "both" []');
    expect(log.count('subscribe')).toBe(1);
    expect(log.count('unsubscribe')).toBe(0);

    view.unmount();
    await waitUntil(() => log.count('unsubscribe') === 1, 'the unsubscribe');
    expect(log.count('subscribe')).toBe(1);
  });

  it('reset subscribes again, fresh', async () => {
    const { gateway, client, log } = await setup();
    const states = recorder<string>();
    let reset!: () => void;
    function Feed() {
      const sub = useSubscription('feed', undefined, { history: 5 });
      reset = sub.reset;
      states.record(sub.status.state);
      return createElement('p', { 'data-testid': 'feed' }, show(sub));
    }
    renderWith(client, createElement(Feed));
    await waitUntil(() => textOf().startsWith('subscribed'), 'subscribed');
    await gateway.publish('feed', 'before');
    await waitUntil(() => textOf() === 'subscribed "before" ["before"]', 'the message');

    act(() => reset());
    expect(textOf()).toBe('connecting undefined []');
    await waitUntil(() => textOf() === 'subscribed undefined []', 'subscribed again');
    await gateway.publish('feed', 'after');
    await waitUntil(() => textOf() === 'subscribed "after" ["after"]', 'the next message');
    expect(log.seen.filter((m) => m === 'subscribe' || m === 'unsubscribe')).toEqual([
      'subscribe',
      'unsubscribe',
      'subscribe',
    ]);
    expect(states.values).toEqual(['connecting', 'subscribed', 'connecting', 'subscribed']);
  });

  it('shows the refusal of a subscribe as error, with the JSON-RPC error', async () => {
    const { client } = await setup();
    let seen: UseSubscriptionResult<unknown> | undefined;
    function Nope() {
      seen = useSubscription('nope');
      return createElement('p', { 'data-testid': 'nope' }, seen.status.state);
    }
    renderWith(client, createElement(Nope));
    await waitUntil(() => textOf('nope') === 'error', 'the refusal');
    expect(seen!.error).toBeInstanceOf(JsonRpcError);
    expect(seen!.error).toMatchObject({ code: -32602 });
    expect(seen!.status).toMatchObject({ state: 'error', error: seen!.error });
  });

  it('is closed and subscribes nothing while not enabled', async () => {
    const { client, log } = await setup();
    function Off() {
      const sub = useSubscription('feed', undefined, { enabled: false });
      return createElement('p', { 'data-testid': 'off' }, sub.status.state);
    }
    renderWith(client, createElement(Off));
    expect(textOf('off')).toBe('closed');
    // A round trip: a subscribe sent before it would have been seen by now.
    await client.call('no.such.method').catch(() => undefined);
    expect(log.count('subscribe')).toBe(0);
  });

  it('shows params JSON cannot carry (a BigInt) as its error, a TypeError', async () => {
    const { client, log } = await setup();
    let seen: UseSubscriptionResult<unknown> | undefined;
    function Unsendable() {
      seen = useSubscription('feed', { from: 1n });
      return createElement('p', { 'data-testid': 'unsendable' }, seen.status.state);
    }
    renderWith(client, createElement(Unsendable));
    await waitUntil(() => textOf('unsendable') === 'error', 'the error');
    expect(seen!.error).toBeInstanceOf(TypeError);
    await client.call('no.such.method').catch(() => undefined);
    expect(log.count('subscribe')).toBe(0);
  });

  it('takes a client made by createSharedClient: its own subscription status', async () => {
    const { gateway, url } = await setup();
    const { tab } = tabs.tab(tabs.host(), url);
    const states = recorder<string>();
    renderWith(tab as unknown as RpcClient, createElement(feedView(states, 2)));
    await waitUntil(() => textOf() === 'subscribed undefined []', 'subscribed');
    await gateway.publish('feed', 'shared');
    await waitUntil(() => textOf() === 'subscribed "shared" ["shared"]', 'the message');
    expect(states.values).toEqual(['connecting', 'subscribed']);
  });
});

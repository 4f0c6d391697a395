/**
 * What a tab sends through the worker is what a client of its own sends: the JSON of its params
 * and of its handlers' results, toJSON applied (a class with a JSON form of its own, a URL),
 * never the structured clone of the objects, which keeps neither toJSON nor any prototype.
 * What JSON cannot carry fails in the tab as it does on a client of its own.
 */
import { firstValueFrom, Observable } from 'rxjs';
import { filter } from 'rxjs/operators';
import { afterEach, describe, expect, it } from 'vitest';
import { JsonRpcError } from '../../src/client/index.js';
import type { TabMessage } from '../../src/client/shared/messages.js';
import type { Params } from '../../src/protocol/types.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { Session } from '../../src/server/session.js';
import { rejectionOf } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { SharedTabs } from '../support/shared-tabs.js';
import { waitFor } from '../support/waiting.js';

const res = new Resources();
const shared = new SharedTabs();
afterEach(async () => {
  await shared.cleanup();
  await res.cleanup();
});

/** A value whose JSON form is its own: what money and decimal libraries make. */
class Money {
  constructor(
    readonly cents: number,
    readonly currency: string,
  ) {}
  toJSON(): string {
    return `${(this.cents / 100).toFixed(2)} ${this.currency}`;
  }
}

const params = (): Params => ({
  price: new Money(150, 'EUR'),
  link: new URL('https://example.com/x'),
  at: new Date(0),
});
/** The JSON of `params()`. */
const sent = { price: '1.50 EUR', link: 'https://example.com/x', at: '1970-01-01T00:00:00.000Z' };

const onlySession = (gateway: Gateway): Session<unknown> => {
  expect(gateway.sessions.size).toBe(1);
  return [...gateway.sessions.values()][0]!;
};

describe('values a tab sends through the worker', () => {
  it('call, batch and notify params reach the gateway as JSON, as a client of its own sends them', async () => {
    const { gateway, url } = await res.gateway();
    const noted: unknown[] = [];
    gateway.method('echo', (p) => p);
    gateway.method('note', (p) => void noted.push(p));
    const direct = res.client(url);
    // What the tab posts to the worker: the params as JSON text, a string to copy rather than
    // an object graph to clone (made again from that text on the page's main thread).
    const posted: TabMessage[] = [];
    const tab = shared.tab(shared.host(), url, {}, (port) => {
      const post = port.postMessage.bind(port);
      port.postMessage = (message: TabMessage) => {
        posted.push(message);
        post(message);
      };
      return port;
    }).tab;
    await Promise.all([direct.opened(), tab.opened()]);

    expect(await direct.call('echo', params())).toEqual(sent);
    expect(await tab.call('echo', params())).toEqual(sent);
    const batch = await tab.batch([
      { method: 'echo', params: params() },
      { method: 'note', params: params(), notification: true },
    ]);
    expect(batch).toEqual([
      { status: 'fulfilled', value: sent },
      { status: 'fulfilled', value: undefined },
    ]);
    tab.notify('note', params());
    await waitFor(() => noted.length === 2, 'the notifications');
    expect(noted).toEqual([sent, sent]);
    const text = JSON.stringify([sent]);
    const paramsPosted = posted.flatMap((m) =>
      m.t === 'call' || m.t === 'notify'
        ? [m.params]
        : m.t === 'batch'
          ? m.entries.map((e) => e.params)
          : [],
    );
    expect(paramsPosted).toEqual([text, text, text, text]);
  });

  it('subscription params: one shared subscription for the value and its JSON, the JSON on the wire', async () => {
    const { gateway, url } = await res.gateway();
    const started: unknown[] = [];
    gateway.stream('quote', (p: unknown) => {
      started.push(p);
      return new Observable((subscriber) => subscriber.next('tick'));
    });
    const direct = res.client(url);
    const host = shared.host();
    const a = shared.tab(host, url).tab;
    const b = shared.tab(host, url).tab;
    await Promise.all([direct.opened(), a.opened(), b.opened()]);

    const money = () => ({ price: new Money(150, 'EUR') });
    expect(await firstValueFrom(direct.subscribe('quote', money()))).toBe('tick');
    const held = a.subscribe('quote', money()).subscribe();
    const subscribed = (tab: typeof a, p: unknown) =>
      firstValueFrom(
        tab.subscriptionStatus$('quote', p).pipe(filter((s) => s.state === 'subscribed')),
      );
    await subscribed(a, money());
    // Named by its JSON in the other tab: the same subscription (a status never subscribes).
    expect(
      (await firstValueFrom(b.subscriptionStatus$('quote', { price: '1.50 EUR' }))).state,
    ).toBe('subscribed');
    held.unsubscribe();
    // The direct client's, then the worker's one for both tabs: params as the direct client's.
    expect(started).toEqual([{ price: '1.50 EUR' }, { price: '1.50 EUR' }]);
  });

  it("handlers' results reach the gateway as JSON; one JSON cannot carry is -32603, as from a client of its own", async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('ping', () => 'pong');
    const tab = shared.tab(shared.host(), url).tab;
    await tab.opened();
    tab.method('client.price', () => params());
    tab.method('client.count', () => 10n);
    // Posted after the handlers on the one port: answered once the worker has them.
    await tab.call('ping');
    const session = onlySession(gateway);
    expect(await session.call('client.price')).toEqual(sent);
    const error = await rejectionOf(session.call('client.count'));
    expect(error).toBeInstanceOf(JsonRpcError);
    expect((error as JsonRpcError).toErrorObject()).toEqual({
      code: -32603,
      message: 'Internal error',
      data: 'result is not serializable as JSON',
    });
  });

  it('what JSON cannot carry fails in the tab, with the TypeError a client of its own gives', async () => {
    const { gateway, url } = await res.gateway();
    const ran: unknown[] = [];
    gateway.method('echo', (p) => void ran.push(p));
    gateway.topic('news');
    const direct = res.client(url);
    const tab = shared.tab(shared.host(), url).tab;
    await Promise.all([direct.opened(), tab.opened()]);
    const big = { n: 1n } as unknown as Params;
    const message = (error: unknown): string => {
      expect(error).toBeInstanceOf(TypeError);
      return (error as Error).message;
    };
    const fromDirect = message(await rejectionOf(direct.call('echo', big)));
    expect(message(await rejectionOf(tab.call('echo', big)))).toBe(fromDirect);
    expect(message(await rejectionOf(tab.batch([{ method: 'echo', params: big }])))).toBe(
      fromDirect,
    );
    expect(() => tab.notify('echo', big)).toThrow(fromDirect);
    expect(message(await rejectionOf(firstValueFrom(tab.subscribe('news', big))))).toBe(
      message(await rejectionOf(firstValueFrom(direct.subscribe('news', big)))),
    );
    expect(await tab.call('echo', [1])).toBeNull();
    expect(ran).toEqual([[1]]);
  });
});

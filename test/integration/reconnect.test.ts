import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { Subtract, Sum } from '../../demo/service.js';
import {
  CancelledError,
  ConnectionClosedError,
  NotConnectedError,
  TimeoutError,
} from '../../src/index.js';
import type { IncomingNotification, Session } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { deferred, rejectionOf, untilAborted } from '../support/promises.js';
import { freePort } from '../support/network.js';
import { recordStates, waitForState } from '../support/client.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** The only session of a gateway, once the client is open on it. */
function onlySession(sessions: ReadonlyMap<string, Session>): Session {
  expect(sessions.size).toBe(1);
  return [...sessions.values()][0]!;
}

describe('reconnect', () => {
  it('reconnects by itself to a gateway restarted on the same port', async () => {
    const first = await res.demoGateway();
    const client = res.client(first.url);
    const { states } = recordStates(client);
    await waitForState(client, 'open');
    expect(await client.call(Subtract, [5, 3])).toBe(2);

    await first.gateway.close();
    await waitForState(client, 'reconnecting');
    expect(first.gateway.sessions.size).toBe(0);

    const second = await res.demoGateway({}, first.port);
    await waitForState(client, 'open');
    expect(await client.call(Subtract, [10, 4])).toBe(6);
    expect(second.gateway.sessions.size).toBe(1);
    expect(states).toEqual(['connecting', 'open', 'reconnecting', 'open']);
  });

  it('reconnects again and again across several restarts', async () => {
    let running = await res.demoGateway();
    const port = running.port;
    const client = res.client(running.url);
    await client.opened();
    for (let round = 0; round < 3; round++) {
      await running.gateway.close();
      await waitForState(client, 'reconnecting');
      running = await res.demoGateway({}, port);
      await waitForState(client, 'open');
      expect(await client.call(Sum, [round, 1])).toBe(round + 1);
    }
  });

  it('queues calls and notifications made while disconnected and sends them after reconnect', async () => {
    const first = await res.demoGateway();
    const client = res.client(first.url);
    await client.opened();
    await first.gateway.close();
    await waitForState(client, 'reconnecting');

    client.notify('record', ['queued note']);
    const a = client.call(Subtract, [3, 1]);
    const b = client.call(Sum, [1, 2, 3]);
    const batch = client.batch([{ method: 'subtract', params: [9, 9] }, { method: 'nope' }]);
    expect(client.state).toBe('reconnecting');

    const second = await res.demoGateway({}, first.port);
    const recorded: unknown[] = [];
    second.gateway.method('record', (params) => {
      recorded.push(params);
    });
    expect(await a).toBe(2);
    expect(await b).toBe(6);
    const settled = await batch;
    expect(settled[0]).toEqual({ status: 'fulfilled', value: 0 });
    expect(settled[1]!.status).toBe('rejected');
    // The notification was queued first, so it was handled before the calls were answered.
    expect(recorded).toEqual([['queued note']]);
  });

  it('queues calls made before the first connection opens', async () => {
    const { url } = await res.demoGateway();
    const client = res.client(url);
    expect(client.state).toBe('connecting');
    const result = client.call(Subtract, [100, 1]);
    expect(await result).toBe(99);
  });

  it('a queued call keeps its own timeout and AbortSignal while it waits', async () => {
    const first = await res.demoGateway();
    const client = res.client(first.url);
    await client.opened();
    await first.gateway.close();
    await waitForState(client, 'reconnecting');

    const timedOut = rejectionOf(client.call(Sum, [1], { timeoutMs: 50 }));
    const controller = new AbortController();
    const cancelled = rejectionOf(client.call(Sum, [2], { signal: controller.signal }));
    const survivor = client.call(Sum, [3], { timeoutMs: 0 });
    controller.abort();
    expect(await cancelled).toBeInstanceOf(CancelledError);
    expect(await timedOut).toBeInstanceOf(TimeoutError);

    await res.demoGateway({}, first.port);
    expect(await survivor).toBe(3);
  });

  it("with whenDisconnected: 'reject' calls made while disconnected reject with NotConnectedError", async () => {
    const first = await res.demoGateway();
    const client = res.client(first.url, { whenDisconnected: 'reject' });
    // Not open yet: rejected at once.
    expect(client.state).toBe('connecting');
    expect(await rejectionOf(client.call(Sum, [1]))).toBeInstanceOf(NotConnectedError);
    await client.opened();

    await first.gateway.close();
    await waitForState(client, 'reconnecting');
    expect(await rejectionOf(client.call(Sum, [1]))).toBeInstanceOf(NotConnectedError);
    expect(await rejectionOf(client.batch([{ method: 'sum', params: [1] }]))).toBeInstanceOf(
      NotConnectedError,
    );
    expect(() => client.notify('update', [1])).toThrow(NotConnectedError);

    await res.demoGateway({}, first.port);
    await waitForState(client, 'open');
    expect(await client.call(Sum, [1, 1])).toBe(2);
  });

  it('enforces maxQueued while disconnected', async () => {
    const first = await res.demoGateway();
    const client = res.client(first.url, { maxQueued: 2 });
    await client.opened();
    await first.gateway.close();
    await waitForState(client, 'reconnecting');

    const a = client.call(Sum, [1]);
    const b = client.call(Sum, [2]);
    const overflow = await rejectionOf(client.call(Sum, [3]));
    expect(overflow).toBeInstanceOf(NotConnectedError);
    expect((overflow as Error).message).toContain('2');
    const overflowBatch = await rejectionOf(client.batch([{ method: 'sum', params: [4] }]));
    expect(overflowBatch).toBeInstanceOf(NotConnectedError);

    await res.demoGateway({}, first.port);
    expect(await Promise.all([a, b])).toEqual([1, 2]);
    // The queue drained, so it takes calls again next time.
    expect(await client.call(Sum, [5])).toBe(5);
  });

  it('rejects calls pending when the server goes away with ConnectionClosedError (not re-sent)', async () => {
    const first = await res.demoGateway();
    let started = 0;
    const allStarted = deferred();
    const aborted: unknown[] = [];
    first.gateway.method('hang', (_params, ctx) => {
      ctx.signal.addEventListener('abort', () => aborted.push(ctx.signal.reason));
      if (++started === 3) allStarted.resolve();
      return untilAborted(ctx.signal);
    });
    const client = res.client(first.url);
    const pending = [1, 2, 3].map(() =>
      rejectionOf(client.call('hang', undefined, { timeoutMs: 0 })),
    );
    await allStarted.promise;

    await first.gateway.close();
    const errors = await Promise.all(pending);
    for (const err of errors) {
      expect(err).toBeInstanceOf(ConnectionClosedError);
      expect(err).toMatchObject({ closeCode: 1001 });
    }
    expect(aborted).toHaveLength(3);

    // They are not re-sent to the next server.
    const second = await res.demoGateway({}, first.port);
    let resent = 0;
    second.gateway.method('hang', () => ++resent);
    await waitForState(client, 'open');
    expect(await client.call(Sum, [1])).toBe(1);
    expect(resent).toBe(0);
  });

  it('connects to the second URL when the first is dead', async () => {
    const deadPort = await freePort();
    const dead = `ws://127.0.0.1:${deadPort}/rpc`;
    const live = await res.demoGateway();
    const client = res.client([dead, live.url]);
    const { states } = recordStates(client);
    await client.opened();
    expect(client.url).toBe(live.url);
    expect(await client.call(Subtract, [7, 2])).toBe(5);
    expect(states).toEqual(['connecting', 'open']);
  });

  it('fails over to the next URL when its gateway goes away', async () => {
    const a = await res.demoGateway();
    const b = await res.demoGateway();
    const client = res.client([a.url, b.url]);
    await client.opened();
    expect(client.url).toBe(a.url);
    expect(a.gateway.sessions.size).toBe(1);

    await a.gateway.close();
    await waitForState(client, 'reconnecting');
    await waitForState(client, 'open');
    expect(client.url).toBe(b.url);
    expect(b.gateway.sessions.size).toBe(1);
    expect(await client.call(Sum, [2, 2])).toBe(4);
  });

  it('keeps one notifications$ subscription working across a reconnect', async () => {
    const first = await res.demoGateway();
    const client = res.client(first.url);
    const seen: IncomingNotification[] = [];
    const subscription = client.notifications$.subscribe((n) => seen.push(n));
    const ofTick: unknown[] = [];
    client.notificationsOf<{ from: string }>('tick').subscribe((p) => ofTick.push(p));
    await client.opened();

    let arrived = firstValueFrom(client.notificationsOf('tick'));
    onlySession(first.gateway.sessions).notify('tick', { from: 'first' });
    await arrived;

    await first.gateway.close();
    await waitForState(client, 'reconnecting');
    const second = await res.demoGateway({}, first.port);
    await waitForState(client, 'open');

    arrived = firstValueFrom(client.notificationsOf('tick'));
    onlySession(second.gateway.sessions).notify('tick', { from: 'second' });
    await arrived;
    // The demo's notify_hello goes through the new session as well.
    const hello = firstValueFrom(client.notificationsOf('hello'));
    await client.call('notify_hello', [3]);
    await hello;

    expect(subscription.closed).toBe(false);
    expect(seen).toEqual([
      { method: 'tick', params: { from: 'first' } },
      { method: 'tick', params: { from: 'second' } },
      { method: 'hello', params: [3] },
    ]);
    expect(ofTick).toEqual([{ from: 'first' }, { from: 'second' }]);
  });

  it('keeps client handlers registered across a reconnect', async () => {
    const first = await res.demoGateway();
    const client = res.client(first.url);
    client.method('client.confirm', ({ question }: { question: string }) => `ok: ${question}`);
    await client.opened();
    expect(await client.call('ask_client', { question: 'one' })).toEqual({
      question: 'one',
      answer: 'ok: one',
    });
    await first.gateway.close();
    await waitForState(client, 'reconnecting');
    await res.demoGateway({}, first.port);
    await waitForState(client, 'open');
    expect(await client.call('ask_client', { question: 'two' })).toEqual({
      question: 'two',
      answer: 'ok: two',
    });
  });
});

/*
 * `reconnect.maxAttempts`: after that many failed reconnects in a row (dials that fail,
 * connections lost before `resetAfterMs`) the client stops and closes as a refusal of its
 * credentials stops it: state `closed`, queued calls, `opened()` and later calls rejecting with
 * ReconnectFailedError, which says the attempts were exhausted and what ended the last one.
 */
import fc from 'fast-check';
import type { Subscription } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { DisconnectEvent } from '../../src/client/authentication.js';
import { resolveClientOptions } from '../../src/client/client-options.js';
import type { Session } from '../../src/index.js';
import type { WebSocketConstructor } from '../../src/transport/websocket-transport.js';
import { NotConnectedError, ReconnectFailedError } from '../../src/protocol/local-errors.js';
import { ReservedMethod } from '../../src/protocol/reserved.js';
import { observeEvents, recordStates, sumGateway } from '../support/client.js';
import { freePort } from '../support/network.js';
import { rejectionOf } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { SharedTabs } from '../support/shared-tabs.js';
import { waitUntil, within } from '../support/waiting.js';

const res = new Resources();
const tabs = new SharedTabs();
const subscriptions: Subscription[] = [];
afterEach(async () => {
  for (const s of subscriptions.splice(0)) s.unsubscribe();
  await tabs.cleanup();
  await res.cleanup();
});

/** Reconnects with almost no delay, so a test runs through its attempts in milliseconds. */
const fast = { initialDelayMs: 1, maxDelayMs: 2, factor: 2, jitter: 0 };

/** A `ws` WebSocket class that counts the dials made with it. */
function countingWebSocket(): { WebSocket: WebSocketConstructor; dials: () => number } {
  let dials = 0;
  class Counting extends WebSocket {
    constructor(url: string, protocols?: string | string[], options?: object) {
      super(url, protocols, options);
      dials++;
    }
  }
  return { WebSocket: Counting, dials: () => dials };
}

describe('reconnect.maxAttempts: the option', () => {
  it('defaults to Infinity; takes an integer of at least 0 or Infinity, and refuses others by name', () => {
    const base = { url: 'ws://127.0.0.1:1/rpc', WebSocket };
    const config = resolveClientOptions(base);
    expect(config.reconnect !== false && config.reconnect.maxAttempts).toBe(Infinity);
    for (const maxAttempts of [0, 3, Infinity]) {
      const given = resolveClientOptions({ ...base, reconnect: { maxAttempts } });
      expect(given.reconnect !== false && given.reconnect.maxAttempts).toBe(maxAttempts);
    }
    for (const bad of [-1, 1.5, Number.NaN]) {
      expect(() => resolveClientOptions({ ...base, reconnect: { maxAttempts: bad } })).toThrow(
        /reconnect\.maxAttempts.*an integer at least 0 or Infinity/,
      );
    }
    expect(() => resolveClientOptions({ ...base, reconnect: { maxAttempts: '3' } })).toThrow(
      TypeError,
    );
  });
});

describe('reconnect.maxAttempts: a port that refuses connections', () => {
  it('stops after maxAttempts reconnects: closed, queued and later calls reject with the attempts exhausted and the last failure', async () => {
    const url = `ws://127.0.0.1:${await freePort()}/rpc`;
    const counting = countingWebSocket();
    const client = res.client(url, {
      WebSocket: counting.WebSocket,
      reconnect: { ...fast, maxAttempts: 3 },
      callTimeoutMs: 0, // a queued call that nothing rejected would wait forever
    });
    const { done } = recordStates(client);
    const events = observeEvents<DisconnectEvent>(client.disconnects$, subscriptions);
    const queued = rejectionOf(client.call('sum', [1, 2]));
    const opened = rejectionOf(client.opened());

    const error = await within(queued, 'the queued call to reject');
    expect(error).toBeInstanceOf(ReconnectFailedError);
    expect(error).toBeInstanceOf(NotConnectedError);
    const gaveUp = error as ReconnectFailedError;
    expect(gaveUp.attempts).toBe(3);
    expect(gaveUp.lastFailure).toMatch(/^connect ECONNREFUSED/);
    expect(gaveUp.message).toMatch(
      /^Reconnect attempts exhausted \(reconnect\.maxAttempts 3; last attempt: connect ECONNREFUSED/,
    );

    expect(await within(done, 'state$ to complete')).toEqual(['connecting', 'closed']);
    expect(await within(opened, 'opened() to reject')).toBe(error);
    expect(await rejectionOf(client.call('sum', [1, 2]))).toBe(error);
    expect(() => client.notify('record', [1])).toThrow(error);
    // The first dial and three reconnects; only the last event says no retry follows.
    expect(counting.dials()).toBe(4);
    expect(events.events.map((e) => e.willRetry)).toEqual([true, true, true, false]);
    expect(events.done).toBe(true);
  });

  it('with maxAttempts 0, stops at the first failure', async () => {
    const url = `ws://127.0.0.1:${await freePort()}/rpc`;
    const counting = countingWebSocket();
    const client = res.client(url, {
      WebSocket: counting.WebSocket,
      reconnect: { ...fast, maxAttempts: 0 },
    });
    const error = await within(rejectionOf(client.opened()), 'opened() to reject');
    expect(error).toBeInstanceOf(ReconnectFailedError);
    expect((error as Error).message).toMatch(/reconnect\.maxAttempts 0; last attempt: connect/);
    expect(counting.dials()).toBe(1);
    expect(client.state).toBe('closed');
  });

  it('dials maxAttempts + 1 times in all, for any small maxAttempts', async () => {
    const url = `ws://127.0.0.1:${await freePort()}/rpc`;
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 5 }), async (maxAttempts) => {
        const counting = countingWebSocket();
        const client = res.client(url, {
          WebSocket: counting.WebSocket,
          reconnect: { ...fast, maxAttempts },
        });
        const events = observeEvents<DisconnectEvent>(client.disconnects$, subscriptions);
        const error = await within(rejectionOf(client.opened()), 'the client to stop');
        expect(error).toMatchObject({ name: 'ReconnectFailedError', attempts: maxAttempts });
        expect(counting.dials()).toBe(maxAttempts + 1);
        expect(events.events.length).toBe(maxAttempts + 1);
        expect(events.events.filter((e) => !e.willRetry).length).toBe(1);
      }),
      { numRuns: 12 },
    );
  });
});

describe('reconnect.maxAttempts: a gateway that accepts and closes at once', () => {
  it('counts connections lost before resetAfterMs as failed attempts, and tells the last close', async () => {
    const { gateway, url } = await sumGateway(res);
    const sessions: Session[] = [];
    subscriptions.push(
      gateway.connected$.subscribe((session: Session) => {
        sessions.push(session);
        session.close(1013, 'try again later');
      }),
    );
    const client = res.client(url, {
      reconnect: { ...fast, resetAfterMs: 60_000, maxAttempts: 2 },
    });
    const { done } = recordStates(client);
    const events = observeEvents<DisconnectEvent>(client.disconnects$, subscriptions);
    expect(await within(done, 'the client to close')).toContain('closed');
    // The first connection and two reconnects.
    expect(sessions.length).toBe(3);
    expect(events.events.map((e) => [e.code, e.willRetry])).toEqual([
      [1013, true],
      [1013, true],
      [1013, false],
    ]);
    const error = await rejectionOf(client.call('sum', [1, 2]));
    expect(error).toBeInstanceOf(ReconnectFailedError);
    expect(error).toMatchObject({
      attempts: 2,
      lastFailure: 'connection closed with 1013 "try again later"',
    });
    expect((error as Error).message).toBe(
      'Reconnect attempts exhausted (reconnect.maxAttempts 2; last connection closed with 1013 "try again later")',
    );
  });

  it('counts afresh after a connection that stayed open resetAfterMs', async () => {
    const { gateway, url } = await sumGateway(res);
    const sessions: Session[] = [];
    subscriptions.push(
      gateway.connected$.subscribe((session: Session) => {
        sessions.push(session);
        setTimeout(() => session.close(1013, 'try again later'), 60);
      }),
    );
    const client = res.client(url, {
      reconnect: { ...fast, resetAfterMs: 20, maxAttempts: 1 },
    });
    // Each connection lasts past resetAfterMs: every loss is followed by a first reconnect.
    await waitUntil(() => sessions.length >= 5, 'five connections');
    expect(client.state).not.toBe('closed');
  });
});

describe('reconnect.maxAttempts: a server that asks its connections to move', () => {
  const move = (session: Session) => session.notify(ReservedMethod.Reconnect, {});
  // Hundreds of connections from one address in a few seconds: no connection rate to refuse one
  // of them (a refused dial is a failure, and would stop a client the model expects open).
  const unlimitedConnects = { limits: { connectionsPerSecondPerIp: 0 } };

  it('a move (rpc.reconnect) is not a failed attempt: with maxAttempts 1, three moves of young connections leave the client open', async () => {
    const { gateway, url } = await sumGateway(res, unlimitedConnects);
    const sessions: Session[] = [];
    subscriptions.push(
      gateway.connected$.subscribe((session: Session) => {
        if (sessions.push(session) <= 3) move(session);
      }),
    );
    const client = res.client(url, {
      reconnect: { ...fast, resetAfterMs: 60_000, maxAttempts: 1 },
    });
    await waitUntil(() => sessions.length === 4, 'the fourth connection');
    expect(await client.call('sum', [1, 2])).toBe(3);
    expect(client.state).toBe('open');
  });

  it('model: moves and losses of young connections in any order; the client stops at the loss past maxAttempts losses in a row, never at a move', async () => {
    const { gateway, url } = await sumGateway(res, unlimitedConnects);
    type Fate = 'move' | 'lose';
    let script: Fate[] = [];
    let sessions = 0;
    subscriptions.push(
      gateway.connected$.subscribe((session: Session) => {
        const fate = script[sessions++];
        if (fate === 'move') move(session);
        else if (fate === 'lose') session.close(1013, 'try again later');
      }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 3 }),
        fc.array(fc.constantFrom<Fate>('move', 'lose'), { maxLength: 7 }),
        async (maxAttempts, fates) => {
          script = fates;
          sessions = 0;
          // The model: losses since the connection began, moves not counted.
          let losses = 0;
          let stopsAt: number | undefined;
          for (const [i, fate] of fates.entries()) {
            if (fate === 'move') continue;
            if (losses >= maxAttempts) {
              stopsAt = i;
              break;
            }
            losses++;
          }
          const client = res.client(url, {
            reconnect: { ...fast, resetAfterMs: 60_000, maxAttempts },
          });
          try {
            if (stopsAt === undefined) {
              await waitUntil(() => sessions === fates.length + 1, 'the last connection');
              expect(await client.call('sum', [1, 2])).toBe(3);
              expect(client.state).toBe('open');
              expect(sessions).toBe(fates.length + 1);
            } else {
              await waitUntil(() => client.state === 'closed', 'the client to stop');
              expect(await rejectionOf(client.call('sum', [1, 2]))).toBeInstanceOf(
                ReconnectFailedError,
              );
              expect(sessions).toBe(stopsAt + 1);
            }
          } finally {
            await client.close();
          }
        },
      ),
      { numRuns: 25 },
    );
  });
});

describe('reconnect.maxAttempts: the shared connection', () => {
  it("a tab's calls and opened() reject with the worker client's ReconnectFailedError", async () => {
    const url = `ws://127.0.0.1:${await freePort()}/rpc`;
    const host = tabs.host({ reconnect: { ...fast, maxAttempts: 1 } });
    const { tab } = tabs.tab(host, url);
    const queued = tab.call('sum', [1, 2]);
    const stopped = await rejectionOf(tab.opened());
    expect(stopped).toBeInstanceOf(ReconnectFailedError);
    expect(stopped).toMatchObject({
      attempts: 1,
      lastFailure: expect.stringContaining('ECONNREFUSED'),
    });
    expect(await rejectionOf(queued)).toBeInstanceOf(ReconnectFailedError);
    expect(await rejectionOf(tab.call('sum', [3, 4]))).toBeInstanceOf(ReconnectFailedError);
  });
});

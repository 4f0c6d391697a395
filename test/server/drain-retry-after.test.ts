/**
 * Every 503 a WebSocket upgrade or an event stream's opening GET gets while the gateway drains,
 * or while its broker is down, carries Retry-After, as the limits table says: 1 while draining
 * (as POST /rpc's), 5 while the broker is down. Among them the refusals decided after the
 * authenticate hook, for a request whose hook was running when the drain began.
 */
import { afterEach, expect, it } from 'vitest';
import { MemoryBroker } from '../../src/index.js';
import { deferred } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { openRaw, upgradeRefusal } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const EVENTS = '/rpc/events';

/** The status and Retry-After of an event stream's opening GET, its body read. */
async function openingGet(url: string): Promise<{ status: number; retryAfter: string | null }> {
  const answer = await fetch(url);
  await answer.text();
  return { status: answer.status, retryAfter: answer.headers.get('retry-after') };
}

/** A MemoryBroker whose readiness the test turns off. */
class SwitchedBroker extends MemoryBroker {
  down = false;

  override get ready(): boolean {
    return !this.down && super.ready;
  }
}

it('while draining: upgrades and event-stream opening GETs get 503 + Retry-After: 1, those whose authenticate ran as the drain began included', async () => {
  let holding = false;
  let heldHooks = 0;
  const hold = deferred();
  const { gateway, url, httpUrl } = await res.gateway({
    routes: { events: EVENTS },
    authenticate: async () => {
      if (holding) {
        heldHooks++;
        await hold.promise;
      }
      return {};
    },
  });
  // A session that never answers the drain's ping keeps the drain going.
  const keeper = await openRaw(res, url);
  holding = true;
  const upgradeDuringHook = upgradeRefusal(res, url);
  const getDuringHook = openingGet(`${httpUrl}${EVENTS}`);
  await waitUntil(() => heldHooks === 2, 'both authenticate runs to start');

  const drained = gateway.drain({ deadlineMs: 15_000 });
  hold.resolve();
  holding = false;

  const upgraded = await upgradeDuringHook;
  expect({ status: upgraded.status, retryAfter: upgraded.headers['retry-after'] }).toEqual({
    status: 503,
    retryAfter: '1',
  });
  expect(await getDuringHook).toEqual({ status: 503, retryAfter: '1' });
  expect(await openingGet(`${httpUrl}${EVENTS}`)).toEqual({ status: 503, retryAfter: '1' });
  const upgradeAfter = await upgradeRefusal(res, url);
  expect({ status: upgradeAfter.status, retryAfter: upgradeAfter.headers['retry-after'] }).toEqual({
    status: 503,
    retryAfter: '1',
  });

  keeper.socket.terminate();
  await drained;
});

it('while the broker is down: an event-stream opening GET gets 503 + Retry-After: 5, as an upgrade does', async () => {
  const broker = new SwitchedBroker();
  const { url, httpUrl } = await res.gateway({ routes: { events: EVENTS }, broker });
  broker.down = true;

  expect(await openingGet(`${httpUrl}${EVENTS}`)).toEqual({ status: 503, retryAfter: '5' });
  const upgrade = await upgradeRefusal(res, url);
  expect({ status: upgrade.status, retryAfter: upgrade.headers['retry-after'] }).toEqual({
    status: 503,
    retryAfter: '5',
  });
  broker.down = false;
});

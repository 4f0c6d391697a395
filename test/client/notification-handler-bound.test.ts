/*
 * Notifications from the server to a method the client has a handler for, while that many
 * handlers already run (the client's maxInFlight, 256): the handler of the ones past it is not
 * run, and that is logged, but every one still reaches `notifications$`. Real gateway.
 */
import { afterEach, expect, it } from 'vitest';
import type { Subscription } from 'rxjs';
import type { Session } from '../../src/index.js';
import { sumGateway } from '../support/client.js';
import { captureLogger, logged } from '../support/logging.js';
import { deferred } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
const subscriptions: Subscription[] = [];
afterEach(async () => {
  for (const s of subscriptions.splice(0)) s.unsubscribe();
  await res.cleanup();
});

it('past 256 running handlers, a notification is still observed; its handler not run is logged', async () => {
  const { gateway, url } = await sumGateway(res);
  const sessions: Session[] = [];
  subscriptions.push(gateway.connected$.subscribe((session: Session) => sessions.push(session)));
  const { logger, records } = captureLogger();
  const client = res.client(url, { logger });
  const release = deferred<void>();
  let ran = 0;
  client.method('tick', async () => {
    ran++;
    await release.promise;
  });
  const observed: unknown[] = [];
  subscriptions.push(client.notifications$.subscribe((n) => observed.push(n.params)));
  await client.opened();
  await waitUntil(() => sessions.length === 1, 'the session');
  for (let i = 0; i < 300; i++) sessions[0]!.notify('tick', [i]);

  await waitUntil(() => observed.length === 300, 'every notification observed');
  expect(observed).toEqual(Array.from({ length: 300 }, (_, i) => [i]));
  expect(ran).toBe(256);
  const skipped = logged(records, 'notification handler not run: too many calls in flight');
  // The first ten of the connection's noise at warn, the rest at debug.
  expect(skipped).toHaveLength(44);
  expect(skipped.filter((r) => r.level === 'warn')).toHaveLength(10);
  release.resolve();
  // Room again once the handlers are done.
  sessions[0]!.notify('tick', [300]);
  await waitUntil(() => ran === 257, 'the handler run again');
});

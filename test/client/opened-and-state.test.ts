/**
 * `opened()` and `state$` as an application leans on them: calls of opened() while the client is
 * not connected share one promise (an app asking again and again through a long outage adds
 * nothing per call), a shared worker's tab's as a client's own, and an observer of state$ that closes the client when it sees 'open' leaves
 * every other observer on 'closed', the state the client is in.
 */
import { afterEach, expect, it } from 'vitest';
import { NotConnectedError } from '../../src/protocol/local-errors.js';
import { sumGateway } from '../support/client.js';
import { rejectionOf } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { SharedTabs } from '../support/shared-tabs.js';

const res = new Resources();
const shared = new SharedTabs();
afterEach(async () => {
  await shared.cleanup();
  await res.cleanup();
});

it('opened() called while not connected: one promise for all, settled once the client opens', async () => {
  const first = await sumGateway(res);
  const port = first.port;
  await res.gateways.pop()!.close();
  const client = res.client(`ws://127.0.0.1:${port}/rpc`);
  const asked = Array.from({ length: 1_000 }, () => client.opened());
  expect(new Set(asked).size).toBe(1);
  await sumGateway(res, {}, port);
  await Promise.all(asked);
  expect(client.state).toBe('open');
  await client.opened();
  await client.close();
  expect(await rejectionOf(client.opened())).toBeInstanceOf(NotConnectedError);
});

it("a shared worker's tab: opened() called while not connected is one promise for all too", async () => {
  const first = await sumGateway(res);
  const port = first.port;
  await res.gateways.pop()!.close();
  const { tab } = shared.tab(shared.host(), `ws://127.0.0.1:${port}/rpc`);
  const asked = Array.from({ length: 1_000 }, () => tab.opened());
  expect(new Set(asked).size).toBe(1);
  await sumGateway(res, {}, port);
  await Promise.all(asked);
  expect(tab.state).toBe('open');
  await tab.opened();
});

it("an observer of state$ that closes the client on 'open': the others end on 'closed'", async () => {
  const { url } = await sumGateway(res);
  const client = res.client(url);
  const closer: string[] = [];
  const other: string[] = [];
  client.state$.subscribe((state) => {
    closer.push(state);
    if (state === 'open') void client.close();
  });
  const done = new Promise<void>((resolve) =>
    client.state$.subscribe({ next: (state) => other.push(state), complete: resolve }),
  );
  await done;
  expect(closer.at(-1)).toBe('closed');
  expect(other.at(-1)).toBe('closed');
  expect(client.state).toBe('closed');
});

/**
 * A node listens to a topic's joins and leaves once, shared by every watcher there (the
 * application's `gateway.presence(topic).events$`, clients' `$presence` subscriptions). A
 * handle the application keeps and subscribes to again after its last observer left joins the
 * watch there is then: it neither takes the broker's subscription from the clients' watch nor
 * ends it when it is done. The handle's topic is held only while watched.
 */
import { firstValueFrom } from 'rxjs';
import { afterEach, expect, it } from 'vitest';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

interface View {
  count: number;
  joined?: { sessionId: string }[];
}

it("a kept handle's events$ subscribed again does not take the topic's events from the clients watching it", async () => {
  const { gateway, url } = await res.gateway({ heartbeatIntervalMs: 0 });
  gateway.topic('room.*', { presence: true });
  const handle = gateway.presence('room.1');
  // Subscribed, then unsubscribed once the first event came (firstValueFrom).
  const first = firstValueFrom(handle.events$);
  const member = await RawRpc.open(url);
  res.track(member.socket);
  await member.request('subscribe', ['room.1']);
  await first;

  const watcher = await RawRpc.open(url);
  res.track(watcher.socket);
  const id = (await watcher.request('subscribe', ['$presence', { topic: 'room.1' }]))
    .result as string;
  // The kept handle again, then done.
  const again = handle.events$.subscribe();
  again.unsubscribe();

  const joining = await RawRpc.open(url);
  res.track(joining.socket);
  await joining.request('subscribe', ['room.1']);
  await watcher.until(
    () => watcher.notifications(id).some((n) => (n.result as View).joined !== undefined),
    'the join told to the client watching',
  );
  expect(
    watcher
      .notifications(id)
      .flatMap((n) => (n.result as View).joined ?? [])
      .map((m) => m.sessionId),
  ).toHaveLength(1);
});

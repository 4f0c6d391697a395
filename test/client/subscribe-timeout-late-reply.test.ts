/**
 * A subscribe that times out on the client as the server takes it: the reply still comes, late.
 * The client retries, and the late reply's subscription is ended on the server rather than left
 * there, sending each message to a connection that drops it; otherwise every such timeout
 * leaves one behind, until the session's maxSubscriptions refuses the client's own.
 */
import { afterEach, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { CaptureLogger } from '../support/logging.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { waitFor, waitUntil } from '../support/waiting.js';

const res = new Resources();
const relays: TcpRelay[] = [];
afterEach(async () => {
  await res.cleanup();
  for (const relay of relays.splice(0)) await relay.cut();
});

it('the late reply of a timed-out subscribe is unsubscribed: one subscription stays, each message once', async () => {
  const { gateway, port } = await res.gateway();
  gateway.topic('news');
  const relay = new TcpRelay(port);
  relays.push(relay);
  const relayPort = await relay.start();
  const logger = new CaptureLogger();
  const client = res.client(`ws://127.0.0.1:${relayPort}/rpc`, {
    callTimeoutMs: 300,
    heartbeat: false,
    logger,
  });
  await client.opened();
  await waitUntil(() => gateway.sessions.size === 1, 'the session');
  const session = [...gateway.sessions.values()][0]!;
  const events: string[] = [];
  const watching = gateway.events$.subscribe((e) => {
    if (e.type === 'subscribe' || e.type === 'unsubscribe') events.push(e.type);
  });

  // The subscribe (and its rpc.cancel) reach the server only after the client gave it up.
  relay.hold();
  const got: unknown[] = [];
  const subscription = client.subscribe('news').subscribe((data) => got.push(data));
  await waitFor(
    () => logger.records.some((r) => r.msg === 'subscribe failed: retrying'),
    'the subscribe timed out',
  );
  relay.release();

  // Two subscribes reached the server: the given-up one, whose reply came late, and the retry.
  // The late one is unsubscribed.
  await waitFor(() => events.filter((e) => e === 'subscribe').length === 2, 'the retry subscribed');
  await waitFor(() => events.includes('unsubscribe'), 'the late one unsubscribed');
  expect(gateway.pubsub.subscriptionCount(session)).toBe(1);
  await gateway.publish('news', 'a');
  await gateway.publish('news', 'b');
  await waitFor(() => got.length === 2, 'the messages');
  expect(got).toEqual(['a', 'b']);
  expect([...events].sort()).toEqual(['subscribe', 'subscribe', 'unsubscribe']);
  subscription.unsubscribe();
  watching.unsubscribe();
});

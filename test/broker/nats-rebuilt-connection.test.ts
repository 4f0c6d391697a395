/**
 * A NatsBroker whose connection is closed for good (the server refuses its credentials twice in
 * a row, so nats.js stops reconnecting) makes a new one once they are taken again. What it was
 * subscribed to holds on the new connection: `$`-topics (node- and user-addressed messages,
 * `$revoke`, `$nodes`, ...) as core NATS subscriptions made again on it, and a topic without a
 * stream yet, whose wait for the stream's creation listens on the new connection. Another node
 * (a second NatsBroker with its own user, never refused) publishes.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { BrokerMessage } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { NatsAuthServer } from '../support/nats-auth-server.js';
import { waitFor } from '../support/waiting.js';

const mustRun = process.env.CI === 'true';
const hasNatsServer = spawnSync('nats-server', ['--version'], { stdio: 'ignore' }).status === 0;
const prefix = `rebuilt${Date.now().toString(36)}`;
const users = { node_a: 'secret-a', node_b: 'secret-b' };

let server: NatsAuthServer;
const brokers: NatsBroker[] = [];
let topicCounter = 0;

beforeAll(async () => {
  if (hasNatsServer || mustRun) server = await NatsAuthServer.start(users);
});

afterEach(async () => {
  await Promise.all(brokers.splice(0).map((broker) => broker.close()));
});

afterAll(async () => {
  await server?.stop();
});

function collector(): { messages: BrokerMessage[]; deliver: (m: BrokerMessage) => void } {
  const messages: BrokerMessage[] = [];
  return { messages, deliver: (m) => messages.push(m) };
}

async function open(user: keyof typeof users, errors: unknown[] = []): Promise<NatsBroker> {
  const broker = await NatsBroker.connect({
    servers: server.url,
    prefix,
    timeoutMs: 5_000,
    reconnectWaitMs: 50,
    healthCheckIntervalMs: 0,
    connection: { user, pass: users[user] },
    onError: (err) => errors.push(err),
  });
  brokers.push(broker);
  return broker;
}

/**
 * Refuse node A's credentials until its connection is closed for good and a fresh connection
 * attempt was refused too, then take them again; resolves once A has made a new connection
 * (onRelinked: the server then has what A subscribed to on it).
 */
async function rebuildConnectionOf(a: NatsBroker, errors: unknown[]): Promise<void> {
  const relinked = new Promise<void>((resolve) => {
    const stop = a.onRelinked(() => {
      stop();
      resolve();
    });
  });
  const before = errors.length;
  await server.reload({ ...users, node_a: 'changed' });
  // The first error is the old connection closing (two refusals in a row); only a closed
  // connection makes the broker try a fresh one, refused as well.
  await waitFor(
    () => !a.ready && errors.length >= before + 2,
    'node A to lose its connection for good and be refused a new one',
  );
  await server.reload(users);
  await waitFor(() => a.ready, 'node A to connect again');
  await relinked;
}

const newTopic = (name: string): string => `${name}.${++topicCounter}`;

/** What a wait is for, with what node A's broker reported meanwhile: a timeout then says why. */
function withErrors(what: string, errors: unknown[]): () => string {
  return () => `${what} (node A reported: ${errors.map(String).join('; ') || 'nothing'})`;
}

describe.skipIf(!hasNatsServer && !mustRun)('NatsBroker after a new connection', () => {
  it('delivers $-topics subscribed to before the connection was made again', async () => {
    const errorsA: unknown[] = [];
    const a = await open('node_a', errorsA);
    const b = await open('node_b');
    const revoke = newTopic('$revoke');
    const addressed = newTopic('$node');
    const seenRevoke = collector();
    const seenAddressed = collector();
    await a.subscribe(revoke, seenRevoke.deliver);
    await a.subscribe(addressed, seenAddressed.deliver);
    await b.publish(revoke, '"before"');
    await waitFor(() => seenRevoke.messages.length === 1, 'the $revoke message before');

    await rebuildConnectionOf(a, errorsA);

    // A probe subscribed on the new connection: B's messages reach A's connection in the order
    // B sent them, so once the probe is in, whatever A holds that was sent before it is in too.
    const probe = newTopic('$probe');
    const seenProbe = collector();
    await a.subscribe(probe, seenProbe.deliver);
    await b.publish(revoke, '"after"');
    await b.publish(addressed, '"hello"');
    await b.publish(probe, '"probe"');
    await waitFor(
      () => seenProbe.messages.length === 1,
      withErrors('the probe on the new connection', errorsA),
      10_000,
    );

    expect(seenRevoke.messages.map((m) => m.payload)).toEqual(['"before"', '"after"']);
    expect(seenAddressed.messages.map((m) => m.payload)).toEqual(['"hello"']);
  });

  it('keeps an unsubscribed $-topic unsubscribed on the new connection', async () => {
    const errorsA: unknown[] = [];
    const a = await open('node_a', errorsA);
    const b = await open('node_b');
    const kept = newTopic('$kept');
    const left = newTopic('$left');
    const seenKept = collector();
    const seenLeft = collector();
    await a.subscribe(kept, seenKept.deliver);
    await a.subscribe(left, seenLeft.deliver);
    await a.unsubscribe(left);

    await rebuildConnectionOf(a, errorsA);

    await b.publish(left, '"gone"');
    await b.publish(kept, '"kept"');
    await waitFor(
      () => seenKept.messages.length === 1,
      withErrors('the message on the kept topic', errorsA),
      10_000,
    );
    expect(seenLeft.messages).toEqual([]);
  });

  it('delivers a topic whose stream is first made after the connection was made again', async () => {
    const errorsA: unknown[] = [];
    const a = await open('node_a', errorsA);
    const b = await open('node_b');
    const topic = newTopic('waiting');
    const seen = collector();
    // No stream yet: A waits for JetStream's advisory that it was made.
    await a.subscribe(topic, seen.deliver);

    await rebuildConnectionOf(a, errorsA);

    expect(await b.publish(topic, '"first"')).toBe(1);
    await waitFor(
      () => seen.messages.length === 1,
      withErrors('the first message of the new stream', errorsA),
      10_000,
    );
    expect(seen.messages.map((m) => [m.seq, m.payload])).toEqual([[1, '"first"']]);
  });

  it('resumes a stream-backed topic and reads the deny list on the new connection', async () => {
    const errorsA: unknown[] = [];
    const a = await open('node_a', errorsA);
    const b = await open('node_b');
    const topic = newTopic('streamed');
    const seen = collector();
    expect(await b.publish(topic, '"one"')).toBe(1);
    await a.subscribe(topic, seen.deliver);
    expect(await b.publish(topic, '"two"')).toBe(2);
    await waitFor(() => seen.messages.length === 1, 'the message before', 10_000);

    await rebuildConnectionOf(a, errorsA);

    expect(await b.publish(topic, '"three"')).toBe(3);
    await waitFor(
      () => seen.messages.length === 2,
      withErrors('the message after', errorsA),
      10_000,
    );
    expect(seen.messages.map((m) => m.seq)).toEqual([2, 3]);
    const user = `revoked-${topicCounter}`;
    await b.deny(user, 1_000, 60_000);
    expect(await a.denied(user)).toMatchObject({ revokedAt: 1_000 });
  });
});

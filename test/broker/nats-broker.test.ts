import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createConnection, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { BrokerMessage } from '../../src/pubsub/broker.js';
import { NatsBroker, encodeTopic } from '../../src/pubsub/nats-broker.js';
import { canConnect, freePort } from '../support/network.js';
import { killChild } from '../support/processes.js';

const NATS_URL = 'nats://127.0.0.1:4222';
const inCi = process.env.CI === 'true';
/** Every stream this run creates starts with it; deleted in afterAll. */
const prefix = `wsrpctest${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;

/** Poll until `condition` holds; the deadline only turns a hang into a readable failure. */
async function waitFor(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function findNatsServer(): string | undefined {
  for (const candidate of [process.env.NATS_SERVER_BIN, 'nats-server', '/usr/sbin/nats-server']) {
    if (!candidate) continue;
    if (spawnSync(candidate, ['--version']).status === 0) return candidate;
  }
  return undefined;
}

const natsUp = await canConnect(4222);
const natsServer = findNatsServer();
const skipShared = !natsUp && !inCi;
const skipFault = !natsServer && !inCi;

/**
 * A TCP pass-through to NATS that a test can cut, to take one node offline, or whose
 * client-to-server direction it can hold back for a while (`holdUpstream`).
 */
interface Proxy {
  url: string;
  cut(): void;
  restore(): void;
  holdUpstream(): void;
  releaseUpstream(): void;
  close(): Promise<void>;
}

async function startProxy(targetPort: number): Promise<Proxy> {
  const sockets = new Set<Socket>();
  let open = true;
  let held: (() => void)[] | undefined;
  const server: Server = createServer((client) => {
    if (!open) {
      client.destroy();
      return;
    }
    const upstream = createConnection({ host: '127.0.0.1', port: targetPort });
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(from);
      if (from === client) {
        from.on('data', (data: Buffer) => {
          if (held) held.push(() => to.write(data));
          else to.write(data);
        });
      } else from.pipe(to);
      from.on('error', () => to.destroy());
      from.on('close', () => {
        sockets.delete(from);
        to.destroy();
      });
    }
  });
  const port = await new Promise<number>((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      resolve(address && typeof address === 'object' ? address.port : 0);
    });
  });
  const cut = (): void => {
    open = false;
    for (const socket of sockets) socket.destroy();
  };
  return {
    url: `nats://127.0.0.1:${port}`,
    cut,
    restore: () => {
      open = true;
    },
    holdUpstream: () => {
      held ??= [];
    },
    releaseUpstream: () => {
      const writes = held ?? [];
      held = undefined;
      for (const write of writes) write();
    },
    close: () => {
      cut();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

const proxies: Proxy[] = [];
const brokers: NatsBroker[] = [];
const children: ChildProcess[] = [];
const tempDirs: string[] = [];
let topicCounter = 0;

function newTopic(name: string): string {
  return `${name}.${++topicCounter}`;
}

async function open(
  servers = NATS_URL,
  timeoutMs = 5_000,
  historyStorage?: 'file' | 'memory',
): Promise<NatsBroker> {
  const broker = await NatsBroker.connect({
    servers,
    prefix,
    timeoutMs,
    ...(historyStorage && { historyStorage }),
  });
  brokers.push(broker);
  return broker;
}

function collector(): { messages: BrokerMessage[]; deliver: (m: BrokerMessage) => void } {
  const messages: BrokerMessage[] = [];
  return { messages, deliver: (m) => messages.push(m) };
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

afterEach(async () => {
  await Promise.all(brokers.splice(0).map((b) => b.close()));
  await Promise.all(proxies.splice(0).map((p) => p.close()));
  for (const child of children.splice(0)) await killChild(child);
  await Promise.all(tempDirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

describe('NatsBroker without a server', () => {
  it('is not ready and rejects publish, subscribe and history clearly when nothing listens', async () => {
    const port = await freePort();
    const broker = await open(`nats://127.0.0.1:${port}`, 1_000);
    expect(broker.ready).toBe(false);
    await expect(broker.publish('t', '1')).rejects.toThrow(/NATS broker unavailable/);
    await expect(broker.subscribe('t', () => undefined)).rejects.toThrow(/unavailable/);
    await expect(broker.history('t', 0)).rejects.toThrow(/unavailable/);
    await broker.close();
    await expect(broker.publish('t', '1')).rejects.toThrow(/closed/);
  });

  it('encodes topics into distinct, valid stream name parts', () => {
    const topics = ['', '_', 'a.b', 'a_2Eb', 'a b', 'ü*>', 'x'.repeat(500), 'x'.repeat(501)];
    const encoded = topics.map(encodeTopic);
    expect(new Set(encoded).size).toBe(topics.length);
    for (const token of encoded) {
      expect(token).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(token.length).toBeLessThanOrEqual(128);
    }
  });
});

describe.skipIf(skipShared)(
  skipShared ? 'NatsBroker (skipped: no NATS on 127.0.0.1:4222)' : 'NatsBroker on the shared NATS',
  () => {
    afterAll(async () => {
      const nc = await connect({ servers: NATS_URL });
      try {
        const jsm = await jetstreamManager(nc);
        const ours: string[] = [];
        for await (const name of jsm.streams.names()) {
          if (name.startsWith(`${prefix}_`)) ours.push(name);
        }
        await Promise.all(ours.map((name) => jsm.streams.delete(name)));
      } finally {
        await nc.close();
      }
    });

    it('numbers the first burst of publishes to a topic in the order they were made', async () => {
      // The subscriber's node creates the stream; the publisher's first publishes then set it
      // up on their side, all in one turn (what a gateway publishing a burst does).
      const topic = newTopic('first-burst');
      const subscriberNode = await open();
      const publisherNode = await open();
      const seen = collector();
      await subscriberNode.subscribe(topic, seen.deliver);
      // Three bursts of ten, one per turn, none awaited: the second and third start while the
      // first burst's stream set-up is still in flight.
      const publishes: Promise<number>[] = [];
      for (let burst = 0; burst < 3; burst++) {
        for (let i = 1; i <= 10; i++) {
          publishes.push(publisherNode.publish(topic, JSON.stringify(burst * 10 + i)));
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(await Promise.all(publishes)).toEqual(range(1, 30));
      await waitFor(() => seen.messages.length >= 30, 'all 30');
      expect(seen.messages.map((m) => JSON.parse(m.payload) as number)).toEqual(range(1, 30));
    });

    it('numbers a topic 1..N across two nodes publishing at once; both subscribers get each message once, in order', async () => {
      const topic = newTopic('concurrent');
      const a = await open();
      const b = await open();
      expect(a.ready && b.ready).toBe(true);
      const atA = collector();
      const atB = collector();
      await a.subscribe(topic, atA.deliver);
      await b.subscribe(topic, atB.deliver);

      const perNode = 40;
      const published = await Promise.all(
        [a, b].flatMap((node, n) =>
          range(1, perNode).map(async (i) => {
            const payload = JSON.stringify({ node: n, i });
            return { seq: await node.publish(topic, payload), payload };
          }),
        ),
      );
      const total = perNode * 2;
      expect(published.map((p) => p.seq).sort((x, y) => x - y)).toEqual(range(1, total));
      const bySeq = new Map(published.map((p) => [p.seq, p.payload]));

      await waitFor(
        () => atA.messages.length >= total && atB.messages.length >= total,
        'both subscribers',
      );
      for (const { messages } of [atA, atB]) {
        expect(messages.map((m) => m.seq)).toEqual(range(1, total));
        for (const m of messages) {
          expect(m.topic).toBe(topic);
          expect(m.payload).toBe(bySeq.get(m.seq));
        }
      }
      // Nothing late or duplicated arrives afterwards.
      expect((await a.history(topic, 0)).lastSeq).toBe(total);
      expect(atA.messages).toHaveLength(total);
      expect(atB.messages).toHaveLength(total);
    });

    it('delivers only messages published after subscribe', async () => {
      const topic = newTopic('new-only');
      const a = await open();
      await a.publish(topic, '"before"');
      const seen = collector();
      await a.subscribe(topic, seen.deliver);
      await a.publish(topic, '"after"');
      await waitFor(() => seen.messages.length >= 1, 'the new message');
      expect(seen.messages).toEqual([
        { topic, seq: 2, payload: '"after"', epoch: (await a.history(topic, 0)).epoch },
      ]);
    });

    it('carries $-topics (messages addressed to a node or user) on core NATS, with no stream', async () => {
      const topic = `$node.${newTopic('direct')}`;
      const a = await open();
      const b = await open();
      const seen = collector();
      await b.subscribe(topic, seen.deliver); // resolves once the server has the interest
      await a.publish(topic, '"hello"');
      await waitFor(() => seen.messages.length >= 1, 'the direct message');
      expect(seen.messages).toEqual([{ topic, seq: 1, payload: '"hello"' }]);
      // No JetStream stream was made for it: history knows nothing of the topic.
      expect(await a.history(topic, 0)).toEqual({ messages: [], lastSeq: 0 });
    });

    it('resolves a $-topic subscribe only once the server has it: what is published after reaches it', async () => {
      const proxy = await startProxy(4222);
      proxies.push(proxy);
      const a = await open();
      const b = await open(proxy.url);
      const topic = `$user.${newTopic('interest')}`;
      const seen = collector();
      proxy.holdUpstream(); // b's SUB (and anything after it) waits in the proxy
      let subscribed = false;
      const subscribing = b.subscribe(topic, seen.deliver).then(() => (subscribed = true));
      await a.publish(topic, '"before the server knew"');
      await a.history(newTopic('round-trip'), 0); // the server has handled a's publish
      expect(subscribed).toBe(false);
      proxy.releaseUpstream();
      await subscribing;
      await a.publish(topic, '"after"');
      await waitFor(() => seen.messages.length >= 1, 'the message published after subscribe');
      expect(seen.messages.map((m) => m.payload)).toEqual(['"after"']);
    });

    it('returns history after a seq with the last seq (0 for an unknown topic)', async () => {
      const topic = newTopic('history');
      const a = await open();
      const b = await open();
      for (const i of range(1, 10)) expect(await a.publish(topic, `{"i":${i}}`)).toBe(i);

      const after4 = await b.history(topic, 4);
      expect(after4.lastSeq).toBe(10);
      expect(after4.messages.map((m) => m.seq)).toEqual(range(5, 10));
      expect(after4.messages.map((m) => m.payload)).toEqual(range(5, 10).map((i) => `{"i":${i}}`));
      expect(after4.messages.every((m) => m.topic === topic)).toBe(true);

      // The epoch names the stream's numbering: the same from every node.
      const { epoch } = await a.history(topic, 0);
      expect(typeof epoch).toBe('string');
      expect(await b.history(topic, 10)).toEqual({ messages: [], lastSeq: 10, epoch });
      expect((await b.history(topic, 0)).messages).toHaveLength(10);
      expect(await b.history(newTopic('never-published'), 0)).toEqual({
        messages: [],
        lastSeq: 0,
      });
    });

    it('keeps only retention.maxLength messages in history; subscribers still get all', async () => {
      const topic = newTopic('retention');
      const a = await open();
      const b = await open();
      const seen = collector();
      await b.subscribe(topic, seen.deliver);
      // The first publish makes the stream (default retention); the subscriber's consumer
      // starts on it; then publishes that keep 3 tighten it.
      expect(await a.publish(topic, '1')).toBe(1);
      await waitFor(() => seen.messages.length >= 1, 'the first message');
      const retention = { maxLength: 3, maxAgeMs: 60_000 };
      for (const i of range(2, 10)) expect(await a.publish(topic, String(i), retention)).toBe(i);

      const history = await b.history(topic, 2);
      expect(history.lastSeq).toBe(10);
      expect(history.messages.map((m) => m.seq)).toEqual([8, 9, 10]);
      expect(history.messages[0]!.seq).toBeGreaterThan(2 + 1);

      await waitFor(() => seen.messages.length >= 10, 'all ten messages');
      expect(seen.messages.map((m) => m.seq)).toEqual(range(1, 10));
    });

    it('keeps topics apart, whatever characters they hold', async () => {
      const a = await open();
      const topics = [newTopic('a.b'), newTopic('a_2Eb'), `${newTopic('ü')} */>`];
      for (const topic of topics) {
        expect(await a.publish(topic, '1')).toBe(1);
        expect(await a.publish(topic, '2')).toBe(2);
      }
      for (const topic of topics) {
        const history = await a.history(topic, 0);
        expect(history.lastSeq).toBe(2);
        expect(history.messages.map((m) => m.topic)).toEqual([topic, topic]);
      }
    });

    it('delivers, in order, what a node missed while it was cut off from NATS', async () => {
      const topic = newTopic('cut-off');
      const proxy = await startProxy(4222);
      proxies.push(proxy);
      const a = await open();
      const b = await open(proxy.url, 2_000);
      const seen = collector();
      await b.subscribe(topic, seen.deliver);
      for (const i of range(1, 3)) await a.publish(topic, String(i));
      await waitFor(() => seen.messages.length >= 3, 'messages before the cut');

      proxy.cut();
      await waitFor(() => !b.ready, 'the cut-off node to notice');
      await expect(b.publish(topic, '"lost"')).rejects.toThrow(/NATS broker unavailable/);
      for (const i of range(4, 8)) expect(await a.publish(topic, String(i))).toBe(i);
      expect(b.ready).toBe(false);

      proxy.restore();
      await waitFor(() => seen.messages.length >= 8, 'the missed messages');
      expect(b.ready).toBe(true);
      expect(await b.publish(topic, '9')).toBe(9);
      await waitFor(() => seen.messages.length >= 9, 'the next message');
      expect(seen.messages.map((m) => m.seq)).toEqual(range(1, 9));
      expect(seen.messages.map((m) => m.payload)).toEqual(range(1, 9).map(String));
    });

    it('survives a throwing subscriber and stops delivering after unsubscribe', async () => {
      const topic = newTopic('unsubscribe');
      const a = await open();
      const seen: number[] = [];
      await a.subscribe(topic, (m) => {
        seen.push(m.seq);
        throw new Error('subscriber bug');
      });
      await a.publish(topic, '1');
      await a.publish(topic, '2');
      await waitFor(() => seen.length >= 2, 'two deliveries');
      await a.unsubscribe(topic);
      await a.publish(topic, '3');
      // Delivery is asynchronous: a later subscription's first message proves the old one had its chance.
      const later = collector();
      await a.subscribe(topic, later.deliver);
      await a.publish(topic, '4');
      await waitFor(() => later.messages.length >= 1, 'the new subscription');
      expect(later.messages.map((m) => m.seq)).toEqual([4]);
      expect(seen).toEqual([1, 2]);
    });

    it('a stream deleted and made again while a node is subscribed: the node reads the new one from its seq 1, under its new epoch', async () => {
      const a = await open();
      const b = await open();
      const topic = newTopic('made-again');
      const seen = collector();
      await a.publish(topic, '"first"');
      await b.subscribe(topic, seen.deliver);
      for (const i of range(1, 5)) await a.publish(topic, `"old ${i}"`);
      await waitFor(() => seen.messages.length >= 5, 'the old messages');
      const nc = await connect({ servers: NATS_URL });
      try {
        const jsm = await jetstreamManager(nc);
        await jsm.streams.delete(`${prefix}_${encodeTopic(topic)}`);
      } finally {
        await nc.close();
      }
      // The publisher finds the stream gone and makes it again: numbered from 1 anew.
      const seqs: number[] = [];
      for (const i of range(1, 3)) seqs.push(await a.publish(topic, `"new ${i}"`));
      expect(seqs).toEqual([1, 2, 3]);
      const newOnes = () => seen.messages.filter((m) => m.payload.startsWith('"new'));
      await waitFor(() => newOnes().length >= 3, 'the new stream read from its start');
      for (const i of range(4, 6)) await a.publish(topic, `"new ${i}"`);
      await waitFor(() => newOnes().length >= 6, 'the later ones');
      expect(newOnes().map((m) => [m.seq, m.payload])).toEqual(
        range(1, 6).map((i) => [i, `"new ${i}"`]),
      );
      const oldEpoch = seen.messages[0]!.epoch;
      expect(seen.messages.slice(0, 5).map((m) => m.epoch)).toEqual(Array(5).fill(oldEpoch));
      expect(new Set(newOnes().map((m) => m.epoch)).size).toBe(1);
      expect(newOnes()[0]!.epoch).not.toBe(oldEpoch);
    });
  },
);

describe.skipIf(skipFault)(
  skipFault ? 'NatsBroker faults (skipped: nats-server not found)' : 'NatsBroker faults',
  () => {
    async function startServer(port: number, storeDir: string): Promise<ChildProcess> {
      const child = spawn(
        natsServer!,
        ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', storeDir],
        { stdio: 'ignore' },
      );
      children.push(child);
      await waitFor(
        async () => child.exitCode === null && (await canConnect(port)),
        'nats-server to listen',
      );
      return child;
    }

    it('recovers after its nats-server is killed and restarted on the same store', async () => {
      const port = await freePort();
      const storeDir = await mkdtemp(join(tmpdir(), 'wsrpc-nats-'));
      tempDirs.push(storeDir);
      const server = await startServer(port, storeDir);
      const url = `nats://127.0.0.1:${port}`;
      const a = await open(url, 2_000);
      const b = await open(url, 2_000);
      const topic = newTopic('fault');
      const seen = collector();
      await b.subscribe(topic, seen.deliver);
      for (const i of range(1, 3)) expect(await a.publish(topic, `"before ${i}"`)).toBe(i);
      await waitFor(() => seen.messages.length >= 3, 'messages before the kill');

      const exited = new Promise((resolve) => server.once('exit', resolve));
      server.kill('SIGKILL');
      await exited;
      await waitFor(() => !a.ready && !b.ready, 'both nodes to notice');
      await expect(a.publish(topic, '"during"')).rejects.toThrow(/NATS broker unavailable/);
      await expect(b.history(topic, 0)).rejects.toThrow(/unavailable/);

      await startServer(port, storeDir);
      await waitFor(() => a.ready && b.ready, 'both nodes to reconnect');
      const after: string[] = [];
      for (const i of range(1, 3)) {
        const payload = `"after ${i}"`;
        // JetStream may still be starting right after the port opens: retry until stored.
        await waitFor(async () => {
          try {
            await a.publish(topic, payload);
            return true;
          } catch {
            return false;
          }
        }, `publish ${payload}`);
        after.push(payload);
      }

      const history = await b.history(topic, 0);
      const payloads = history.messages.map((m) => m.payload);
      expect(payloads.slice(0, 3)).toEqual(range(1, 3).map((i) => `"before ${i}"`));
      expect(payloads.slice(-3)).toEqual(after);
      expect(history.messages.map((m) => m.seq)).toEqual(range(1, history.lastSeq));

      await waitFor(() => seen.messages.length >= history.lastSeq, 'delivery after restart');
      expect(seen.messages.map((m) => m.seq)).toEqual(range(1, history.lastSeq));
      expect(seen.messages.map((m) => m.payload)).toEqual(payloads);
    });

    it('with historyStorage memory, a restart loses the topic: it is numbered anew from 1, under a new epoch', async () => {
      const port = await freePort();
      const storeDir = await mkdtemp(join(tmpdir(), 'wsrpc-nats-'));
      tempDirs.push(storeDir);
      const server = await startServer(port, storeDir);
      const url = `nats://127.0.0.1:${port}`;
      const a = await open(url, 2_000, 'memory');
      const b = await open(url, 2_000, 'memory');
      const topic = newTopic('memory-fault');
      const seen = collector();
      await b.subscribe(topic, seen.deliver);
      for (const i of range(1, 3)) expect(await a.publish(topic, `"before ${i}"`)).toBe(i);
      await waitFor(() => seen.messages.length >= 3, 'messages before the kill');
      const before = (await b.history(topic, 0)).epoch;

      const exited = new Promise((resolve) => server.once('exit', resolve));
      server.kill('SIGKILL');
      await exited;
      await waitFor(() => !a.ready && !b.ready, 'both nodes to notice');
      await startServer(port, storeDir);
      await waitFor(() => a.ready && b.ready, 'both nodes to reconnect');
      expect(await b.history(topic, 0)).toEqual({ messages: [], lastSeq: 0 });
      let seq = 0;
      await waitFor(async () => {
        try {
          seq = await a.publish(topic, '"after"');
          return true;
        } catch {
          return false;
        }
      }, 'the publish after the restart');
      expect(seq).toBe(1);
      await waitFor(() => seen.messages.length >= 4, 'delivery after restart');
      const last = seen.messages[3]!;
      expect([last.seq, last.payload]).toEqual([1, '"after"']);
      expect(last.epoch).not.toBe(before);
      expect(seen.messages.slice(0, 3).every((m) => m.epoch === before)).toBe(true);
    });
  },
);

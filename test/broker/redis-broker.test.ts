import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { BrokerMessage } from '../../src/pubsub/broker.js';
import { RedisBroker, redisTopicKeys } from '../../src/pubsub/redis-broker.js';
import type { RedisBrokerOptions } from '../../src/pubsub/redis-broker.js';
import { canConnect, freePort } from '../support/network.js';
import { killChild } from '../support/processes.js';

const REDIS_URL = 'redis://127.0.0.1:6379';

async function waitFor(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const range = (from: number, to: number): number[] =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

const reachable = await canConnect(6379);
const mustRun = process.env.CI === 'true';
const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;
if (!reachable && !mustRun) {
  console.warn('Skipping RedisBroker tests: no Redis on 127.0.0.1:6379 (set CI=true to fail)');
}

const runPrefix = `wsrpc-test:${randomBytes(6).toString('hex')}:`;

/**
 * A TCP relay to a Redis whose replies the test can hold back and let through one line at
 * a time (an error reply such as NOSCRIPT is one line), to order replies against new calls.
 */
class HoldingRelay {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private holding = false;
  private held: { to: Socket; data: Buffer }[] = [];
  private toServer = '';

  constructor(private readonly targetPort: number) {}

  async start(): Promise<number> {
    const server = createServer((inbound) => {
      const outbound = connect({ host: '127.0.0.1', port: this.targetPort });
      for (const socket of [inbound, outbound]) {
        this.sockets.add(socket);
        socket.on('error', () => undefined);
        socket.once('close', () => {
          inbound.destroy();
          outbound.destroy();
        });
      }
      inbound.on('data', (data: Buffer) => {
        if (this.holding) this.toServer += data.toString('latin1');
        outbound.write(data);
      });
      outbound.on('data', (data: Buffer) => {
        if (this.holding) this.held.push({ to: inbound, data });
        else inbound.write(data);
      });
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  }

  hold(): void {
    this.holding = true;
  }

  /** What clients sent since `hold()`. */
  sentToServer(): string {
    return this.toServer;
  }

  /** Let the first held line (one single-line reply) through. */
  releaseLine(): void {
    const first = this.held[0];
    if (!first) throw new Error('no reply held');
    const end = first.data.indexOf('\r\n') + 2;
    if (end < 2) throw new Error('no complete line held');
    first.to.write(first.data.subarray(0, end));
    if (end === first.data.length) this.held.shift();
    else first.data = first.data.subarray(end);
  }

  /** Let everything through and stop holding. */
  release(): void {
    this.holding = false;
    for (const { to, data } of this.held.splice(0)) to.write(data);
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    const server = this.server;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
const relays: HoldingRelay[] = [];

describe.skipIf(!reachable && !mustRun)(
  reachable ? 'RedisBroker' : 'RedisBroker (skipped: no Redis on 127.0.0.1:6379)',
  () => {
    const brokers: RedisBroker[] = [];
    const children: ChildProcess[] = [];
    const tempDirs: string[] = [];
    let testCount = 0;

    function broker(options: Partial<RedisBrokerOptions> = {}): RedisBroker {
      const created = new RedisBroker({ url: REDIS_URL, prefix: runPrefix, ...options });
      brokers.push(created);
      return created;
    }

    async function connected(options: Partial<RedisBrokerOptions> = {}): Promise<RedisBroker> {
      const created = broker(options);
      await created.connect();
      return created;
    }

    /** Subscribes and collects what the broker delivers. */
    async function collect(on: RedisBroker, topic: string): Promise<BrokerMessage[]> {
      const received: BrokerMessage[] = [];
      await on.subscribe(topic, (message) => received.push(message));
      return received;
    }

    function topicName(): string {
      testCount += 1;
      return `topic-${testCount}`;
    }

    /** A redis-server of the test's own, on `port`; resolves once it accepts connections. */
    async function startRedis(port: number, extra: string[] = []): Promise<ChildProcess> {
      const dir = mkdtempSync(join(tmpdir(), 'wsrpc-redis-'));
      tempDirs.push(dir);
      const child = spawn(
        'redis-server',
        ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']
          .concat(['--daemonize', 'no', '--dir', dir])
          .concat(extra),
        { stdio: 'ignore' },
      );
      children.push(child);
      await waitFor(() => child.exitCode !== null || canConnect(port), 'redis-server to listen');
      if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
      return child;
    }

    const kill = (child: ChildProcess) => killChild(child);

    afterEach(async () => {
      await Promise.all(brokers.splice(0).map((b) => b.close()));
      await Promise.all(relays.splice(0).map((r) => r.close()));
      await Promise.all(children.splice(0).map(kill));
      for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
    });

    afterAll(async () => {
      // Delete this run's keys; give up quietly when there is no Redis to clean.
      const admin = new Redis(REDIS_URL, { retryStrategy: () => null, maxRetriesPerRequest: 0 });
      admin.on('error', () => undefined);
      try {
        let cursor = '0';
        do {
          const [next, keys] = await admin.scan(cursor, 'MATCH', `${runPrefix}*`, 'COUNT', 500);
          cursor = next;
          if (keys.length > 0) await admin.del(...keys);
        } while (cursor !== '0');
      } catch {
        // Nothing reachable to clean.
      } finally {
        admin.disconnect();
      }
    });

    it('numbers concurrent publishes from two nodes 1..N, and both nodes deliver all in order once', async () => {
      const topic = topicName();
      const [a, b] = await Promise.all([connected(), connected()]);
      const [atA, atB] = await Promise.all([collect(a, topic), collect(b, topic)]);

      const perNode = 60;
      const published = await Promise.all([
        ...range(1, perNode).map(async (i) => ({
          payload: `"a${i}"`,
          seq: await a.publish(topic, `"a${i}"`),
        })),
        ...range(1, perNode).map(async (i) => ({
          payload: `"b${i}"`,
          seq: await b.publish(topic, `"b${i}"`),
        })),
      ]);
      const total = perNode * 2;
      expect(published.map((p) => p.seq).sort((x, y) => x - y)).toEqual(range(1, total));

      await waitFor(() => atA.length >= total && atB.length >= total, 'both nodes to receive all');
      const bySeq = new Map(published.map((p) => [p.seq, p.payload]));
      for (const received of [atA, atB]) {
        expect(received.map((m) => m.seq)).toEqual(range(1, total));
        for (const message of received) {
          expect(message.topic).toBe(topic);
          expect(message.payload).toBe(bySeq.get(message.seq));
        }
      }
      // Each node's own publishes keep their relative order.
      const order = (prefix: string): string[] =>
        atB.map((m) => m.payload).filter((p) => p.startsWith(`"${prefix}`));
      expect(order('a')).toEqual(range(1, perNode).map((i) => `"a${i}"`));
      await sleep(50);
      expect(atA).toHaveLength(total); // nothing delivered twice later on
      expect(atB).toHaveLength(total);
    });

    it('returns history after a seq, with the latest seq', async () => {
      const topic = topicName();
      const a = await connected();
      for (const i of range(1, 10)) expect(await a.publish(topic, `{"n":${i}}`)).toBe(i);

      const after4 = await a.history(topic, 4);
      expect(after4.lastSeq).toBe(10);
      expect(after4.messages.map((m) => m.seq)).toEqual(range(5, 10));
      expect(after4.messages.map((m) => m.payload)).toEqual(range(5, 10).map((i) => `{"n":${i}}`));
      expect(after4.messages.every((m) => m.topic === topic)).toBe(true);

      // The epoch names the topic's numbering (a random id made with its first publish).
      const { epoch } = await a.history(topic, 0);
      expect(epoch).toMatch(/^[0-9a-f]{16}$/);
      expect(await a.history(topic, 10)).toEqual({ messages: [], lastSeq: 10, epoch });
      expect(await a.history(topic, 0)).toMatchObject({ lastSeq: 10 });
      expect((await a.history(topic, 0)).messages).toHaveLength(10);
      expect(await a.history(`${topic}-never-published`, 0)).toEqual({ messages: [], lastSeq: 0 });

      // Another node reads the same history.
      const b = await connected();
      expect(await b.history(topic, 4)).toEqual(after4);
    });

    it('trims history to maxLength, so a resume from before it sees the gap', async () => {
      const topic = topicName();
      const a = await connected();
      for (const i of range(1, 20))
        await a.publish(topic, String(i), { maxLength: 5, maxAgeMs: 60_000 });

      const history = await a.history(topic, 2);
      expect(history.lastSeq).toBe(20);
      expect(history.messages.map((m) => m.seq)).toEqual(range(16, 20));
      expect(history.messages[0]!.seq).toBeGreaterThan(2 + 1); // the caller's gap signal
      expect(await a.history(topic, 17)).toMatchObject({ lastSeq: 20 });
      expect((await a.history(topic, 17)).messages.map((m) => m.seq)).toEqual([18, 19, 20]);
    });

    it('trims history by age on publish, and lets the stream expire', async () => {
      const topic = topicName();
      const a = await connected();
      await a.publish(topic, '1', { maxLength: 100, maxAgeMs: 1 });
      await a.publish(topic, '2', { maxLength: 100, maxAgeMs: 1 });
      await sleep(20); // Redis's clock moves past the 1 ms age limit
      await a.publish(topic, '3', { maxLength: 100, maxAgeMs: 60_000 });
      expect(await a.history(topic, 0)).toMatchObject({
        messages: [{ topic, seq: 3, payload: '3' }],
        lastSeq: 3,
      });
      const admin = new Redis(REDIS_URL);
      try {
        const ttl = await admin.pttl(redisTopicKeys(runPrefix, topic).log);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(60_000);
      } finally {
        admin.disconnect();
      }
    });

    it("a topic's meta key expires idleTopicTtlMs after its history's age limit; with no age limit it is kept", async () => {
      const aged = topicName();
      const kept = topicName();
      const a = await connected({ idleTopicTtlMs: 5_000 });
      await a.publish(aged, '1', { maxLength: 100, maxAgeMs: 60_000 });
      await a.publish(kept, '1', { maxLength: 100, maxAgeMs: Infinity });
      const admin = new Redis(REDIS_URL);
      try {
        const ttl = await admin.pttl(redisTopicKeys(runPrefix, aged).meta);
        expect(ttl).toBeGreaterThan(60_000);
        expect(ttl).toBeLessThanOrEqual(65_000);
        expect(await admin.pttl(redisTopicKeys(runPrefix, kept).meta)).toBe(-1);
        // Forgotten: the next publish starts a new numbering under a new epoch.
        const epoch = (await a.history(aged, 0)).epoch;
        await admin.del(redisTopicKeys(runPrefix, aged).meta);
        await a.publish(aged, '2', { maxLength: 100, maxAgeMs: 60_000 });
        const after = await a.history(aged, 0);
        expect(after.lastSeq).toBe(1);
        expect(after.epoch).not.toBe(epoch);
      } finally {
        admin.disconnect();
      }
    });

    it('fills a gap from the stream when live messages were missed', async () => {
      const topic = topicName();
      const [a, b] = await Promise.all([connected(), connected()]);
      const atB = await collect(b, topic);
      await a.publish(topic, '"one"');
      await waitFor(() => atB.length === 1, 'the first message');

      // Store seqs 2 and 3 without publishing them on the channel, as if B missed them.
      const keys = redisTopicKeys(runPrefix, topic);
      const admin = new Redis(REDIS_URL);
      try {
        for (const payload of ['"two"', '"three"']) {
          const seq = await admin.hincrby(keys.meta, 'n', 1);
          await admin.xadd(keys.log, `${seq}-0`, 't', String(Date.now()), 'p', payload);
        }
      } finally {
        admin.disconnect();
      }
      expect(await a.publish(topic, '"four"')).toBe(4);
      await waitFor(() => atB.length >= 4, 'the missed messages');
      expect(atB.map((m) => [m.seq, m.payload])).toEqual([
        [1, '"one"'],
        [2, '"two"'],
        [3, '"three"'],
        [4, '"four"'],
      ]);
    });

    it('a resubscribe that fails once the subscriber connection is back is tried again: its topics are heard', async () => {
      const topic = topicName();
      const [a, b] = await Promise.all([connected(), connected()]);
      const atB = await collect(b, topic);
      // The first SUBSCRIBE after the reconnect fails, as one that timed out on a slow Redis does.
      const inside = b as unknown as {
        direct: { resubscribe: () => Promise<void> };
        subscriber: { status: string; disconnect(reconnect: boolean): void };
      };
      const resubscribe = inside.direct.resubscribe.bind(inside.direct);
      let failures = 1;
      inside.direct.resubscribe = () =>
        failures-- > 0 ? Promise.reject(new Error('Command timed out')) : resubscribe();
      inside.subscriber.disconnect(true);
      await waitFor(() => failures < 0, 'the resubscribe tried again');
      await a.publish(topic, '"after the reconnect"');
      await waitFor(() => atB.length === 1, 'the message after the reconnect');
      expect(atB.map((m) => m.payload)).toEqual(['"after the reconnect"']);
    });

    it('a subscribe whose SUBSCRIBE timed out leaves no channel subscribed on Redis', async () => {
      const topic = topicName();
      const b = await connected();
      // It reaches Redis, but its answer is not waited for: a SUBSCRIBE that timed out.
      const subscriber = (b as unknown as { subscriber: Redis }).subscriber;
      const subscribe = subscriber.subscribe.bind(subscriber);
      subscriber.subscribe = ((channel: string) => {
        void subscribe(channel).catch(() => undefined);
        return Promise.reject(new Error('Command timed out'));
      }) as typeof subscriber.subscribe;
      await expect(b.subscribe(topic, () => undefined)).rejects.toThrow();
      const admin = new Redis(REDIS_URL);
      try {
        const channel = redisTopicKeys(runPrefix, topic).channel;
        const subscribers = async (): Promise<number> => {
          const [, count] = (await admin.pubsub('NUMSUB', channel)) as [string, number];
          return Number(count);
        };
        // Its SUBSCRIBE ran, and was undone after it.
        await waitFor(async () => (await subscribers()) === 0, 'the channel unsubscribed');
        await sleep(100);
        expect(await subscribers()).toBe(0);
      } finally {
        admin.disconnect();
      }
    });

    it('delivers what was published after subscribe was called, and stops after unsubscribe', async () => {
      const topic = topicName();
      const [a, b] = await Promise.all([connected(), connected()]);
      await a.publish(topic, '"before"');
      const atB = await collect(b, topic);
      await a.publish(topic, '"after"');
      await waitFor(() => atB.length === 1, 'the message after subscribe');
      const { epoch } = await a.history(topic, 0);
      expect(atB).toEqual([{ topic, seq: 2, payload: '"after"', epoch }]);

      await b.unsubscribe(topic);
      await a.publish(topic, '"unsubscribed"');
      const again = await collect(b, `${topic}-other`);
      await a.publish(`${topic}-other`, '"other"');
      await waitFor(() => again.length === 1, 'a message on another topic');
      expect(atB).toHaveLength(1);
    });

    it('carries $-topics (addressed messages) on a plain channel, keeping no keys for them', async () => {
      const topic = `$user.${topicName()}`;
      const [a, b] = await Promise.all([connected(), connected()]);
      const atB = await collect(b, topic);
      expect(await a.publish(topic, '"hello"')).toBe(0);
      await waitFor(() => atB.length === 1, 'the addressed message');
      expect(atB).toEqual([{ topic, seq: 0, payload: '"hello"' }]);
      const keys = redisTopicKeys(runPrefix, topic);
      const probe = new Redis(REDIS_URL);
      try {
        expect(await probe.exists(keys.meta, keys.log)).toBe(0);
      } finally {
        probe.disconnect();
      }
      await b.unsubscribe(topic);
      await a.publish(topic, '"after unsubscribe"');
      await a.publish(topicName(), '"flush"');
      expect(atB).toHaveLength(1);
    });

    it.skipIf(!hasRedisServer && !mustRun)(
      'catches up from the stream after its subscriber connection was cut',
      async () => {
        const port = await freePort();
        await startRedis(port);
        const url = `redis://127.0.0.1:${port}`;
        const topic = topicName();
        const a = await connected({ url });
        // A slow reconnect leaves a window in which A's publishes miss B's subscriber.
        const b = await connected({ url, reconnectMaxDelayMs: 500 });
        const atB = await collect(b, topic);
        await a.publish(topic, '1');
        await waitFor(() => atB.length === 1, 'the first message');

        const admin = new Redis(url);
        try {
          await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
        } finally {
          admin.disconnect();
        }
        for (const i of range(2, 6)) await a.publish(topic, String(i));
        await waitFor(() => atB.length >= 6, 'the messages published while cut off');
        await a.publish(topic, '7');
        await waitFor(() => atB.length >= 7, 'a live message after the reconnect');
        expect(atB.map((m) => m.seq)).toEqual(range(1, 7));
        expect(atB.map((m) => m.payload)).toEqual(range(1, 7).map(String));
      },
    );

    it.skipIf(!hasRedisServer && !mustRun)(
      'rejects a publish that gets no reply within commandTimeoutMs',
      async () => {
        const port = await freePort();
        await startRedis(port);
        const url = `redis://127.0.0.1:${port}`;
        const topic = topicName();
        const a = await connected({ url, commandTimeoutMs: 200 });
        expect(await a.publish(topic, '1')).toBe(1);
        const admin = new Redis(url);
        try {
          await admin.client('PAUSE', 60_000, 'WRITE'); // the publish script waits
          await expect(a.publish(topic, '2')).rejects.toThrow(
            /Redis broker unavailable.*timed out/i,
          );
          await admin.client('UNPAUSE');
        } finally {
          admin.disconnect();
        }
        // The timed-out publish was sent, so Redis ran it once unpaused: a rejected publish
        // may still have been stored.
        expect(await a.publish(topic, '3')).toBe(3);
        expect((await a.history(topic, 0)).messages.map((m) => m.payload)).toEqual(['1', '2', '3']);
      },
    );

    it('is not ready and rejects clearly when nothing listens', async () => {
      const port = await freePort();
      const errors: Error[] = [];
      const b = broker({
        url: `redis://127.0.0.1:${port}`,
        onError: (error) => errors.push(error),
      });
      expect(b.ready).toBe(false);
      await expect(b.publish('t', '1')).rejects.toThrow(/Redis broker unavailable/);
      await expect(b.subscribe('t', () => undefined)).rejects.toThrow(/Redis broker unavailable/);
      await expect(b.history('t', 0)).rejects.toThrow(/Redis broker unavailable/);
      await expect(b.connect(300)).rejects.toThrow(/Redis broker unavailable/);
      await waitFor(() => errors.length > 0, 'a connection error report');
      expect(b.ready).toBe(false);
      await expect(
        RedisBroker.create({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 300 }),
      ).rejects.toThrow(/Redis broker unavailable/);
      await b.close();
      await expect(b.publish('t', '1')).rejects.toThrow(/closed/);
    });

    it.skipIf(!hasRedisServer && !mustRun)(
      'survives its Redis being killed and restarted empty: rejects meanwhile, then recovers',
      async () => {
        const port = await freePort();
        const server = await startRedis(port);
        const url = `redis://127.0.0.1:${port}`;
        const topic = topicName();
        const a = await connected({ url, commandTimeoutMs: 1_000, reconnectMaxDelayMs: 200 });
        const b = await connected({ url, commandTimeoutMs: 1_000, reconnectMaxDelayMs: 200 });
        const atB = await collect(b, topic);
        for (const i of range(1, 3)) expect(await a.publish(topic, `"before-${i}"`)).toBe(i);
        await waitFor(() => atB.length === 3, 'the messages before the outage');

        await kill(server);
        await waitFor(() => !a.ready && !b.ready, 'both brokers to notice');
        await expect(a.publish(topic, '"lost"')).rejects.toThrow(/Redis broker unavailable/);
        await expect(a.history(topic, 0)).rejects.toThrow(/Redis broker unavailable/);
        await sleep(300); // a few failed reconnects: nothing throws out of the brokers

        await startRedis(port);
        await waitFor(() => a.ready && b.ready, 'both brokers to reconnect');
        // Without persistence Redis comes back empty: the topic starts a new epoch at seq 1.
        const seqs: number[] = [];
        for (const i of range(1, 3)) seqs.push(await a.publish(topic, `"after-${i}"`));
        expect(seqs).toEqual([1, 2, 3]);
        await waitFor(() => atB.length >= 6, 'the messages after the restart');
        expect(atB.map((m) => m.payload)).toEqual([
          '"before-1"',
          '"before-2"',
          '"before-3"',
          '"after-1"',
          '"after-2"',
          '"after-3"',
        ]);
        expect(atB.map((m) => m.seq)).toEqual([1, 2, 3, 1, 2, 3]);
        expect((await b.history(topic, 0)).messages.map((m) => m.payload)).toEqual([
          '"after-1"',
          '"after-2"',
          '"after-3"',
        ]);
      },
    );

    it.skipIf(!hasRedisServer && !mustRun)(
      'keeps seqs and history across a restart of a Redis with an append-only file',
      async () => {
        const port = await freePort();
        const persistent = ['--appendonly', 'yes', '--appendfsync', 'always'];
        const server = await startRedis(port, persistent);
        const url = `redis://127.0.0.1:${port}`;
        const topic = topicName();
        const a = await connected({ url, commandTimeoutMs: 1_000, reconnectMaxDelayMs: 200 });
        const b = await connected({ url, commandTimeoutMs: 1_000, reconnectMaxDelayMs: 200 });
        const atB = await collect(b, topic);
        for (const i of range(1, 3)) await a.publish(topic, String(i));
        await waitFor(() => atB.length === 3, 'the messages before the outage');

        // The restarted server reuses the same --dir, so it reloads the append-only file.
        const dir = tempDirs[tempDirs.length - 1]!;
        await kill(server);
        await waitFor(() => !a.ready, 'A to notice');
        await expect(a.publish(topic, '0')).rejects.toThrow(/Redis broker unavailable/);
        const restarted = spawn(
          'redis-server',
          ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--daemonize', 'no']
            .concat(['--dir', dir])
            .concat(persistent),
          { stdio: 'ignore' },
        );
        children.push(restarted);
        await waitFor(() => a.ready && b.ready, 'both brokers to reconnect');

        expect(await a.publish(topic, '4')).toBe(4);
        await waitFor(() => atB.length >= 4, 'the message after the restart');
        expect(atB.map((m) => m.seq)).toEqual([1, 2, 3, 4]);
        expect((await b.history(topic, 1)).messages.map((m) => m.seq)).toEqual([2, 3, 4]);
      },
    );

    it.skipIf(!hasRedisServer && !mustRun)(
      "keeps one node's publish order when Redis loses its script cache (SCRIPT FLUSH)",
      async () => {
        const port = await freePort();
        await startRedis(port);
        const relay = new HoldingRelay(port);
        relays.push(relay);
        const url = `redis://127.0.0.1:${await relay.start()}`;
        const topic = topicName();
        const a = await connected({ url });
        expect(await a.publish(topic, '"warm-up"')).toBe(1); // the script is loaded
        const admin = new Redis(`redis://127.0.0.1:${port}`);
        try {
          await admin.script('FLUSH');
        } finally {
          admin.disconnect();
        }
        // Replies from Redis are held, so the interleaving is the test's: 2 and 3 both fail
        // with NOSCRIPT; 2's reply comes back first and 2 is sent again (as EVAL, which loads
        // the script); then 4 is made, while 3's NOSCRIPT reply is still on its way.
        relay.hold();
        const made = [a.publish(topic, '2'), a.publish(topic, '3')];
        await waitFor(() => relay.sentToServer().match(/evalsha/gi)?.length === 2, 'both sent');
        relay.releaseLine();
        await waitFor(() => /\beval\r\n/i.test(relay.sentToServer()), '2 sent again as EVAL');
        // Without care, 4 goes out now as EVALSHA and Redis runs it before 3's EVAL.
        made.push(a.publish(topic, '4'));
        relay.release();
        expect(await Promise.all(made)).toEqual([2, 3, 4]);
        const stored = (await a.history(topic, 0)).messages.map((m) => m.payload);
        expect(stored).toEqual(['"warm-up"', '2', '3', '4']);
      },
    );

    it("history leaves out messages older than the topic's age limit, also between publishes", async () => {
      const topic = topicName();
      const a = await connected();
      const b = await connected();
      const retention = { maxLength: 100, maxAgeMs: 60_000 };
      for (const i of range(1, 3)) await a.publish(topic, String(i), retention);
      expect((await b.history(topic, 0)).messages.map((m) => m.seq)).toEqual([1, 2, 3]);
      // The age limit is kept with the topic (meta `a`, set by each publish). Lower it, as a
      // publish with a 1 ms limit would, but without the trim that publish would also do:
      // what a read sees between two publishes once the messages are older than the limit.
      const keys = redisTopicKeys(runPrefix, topic);
      const admin = new Redis(REDIS_URL);
      try {
        expect(await admin.hget(keys.meta, 'a')).toBe('60000');
        await admin.hset(keys.meta, 'a', '1');
      } finally {
        admin.disconnect();
      }
      await sleep(20); // Redis's clock moves past the 1 ms limit
      const history = await b.history(topic, 0);
      expect(history).toMatchObject({ messages: [], lastSeq: 3 });
      expect((await b.history(topic, 2)).messages).toEqual([]);
      // The numbering goes on.
      expect(await a.publish(topic, '4', { maxLength: 100, maxAgeMs: 1 })).toBe(4);
    });

    it('reports exceptions thrown by deliver and keeps delivering', async () => {
      const topic = topicName();
      const errors: Error[] = [];
      const [a, b] = await Promise.all([
        connected(),
        connected({ onError: (e) => errors.push(e) }),
      ]);
      const seen: number[] = [];
      await b.subscribe(topic, (message) => {
        seen.push(message.seq);
        if (message.seq === 1) throw new Error('subscriber bug');
      });
      await a.publish(topic, '1');
      await a.publish(topic, '2');
      await waitFor(() => seen.length === 2, 'both messages');
      expect(errors.map((e) => e.message)).toContain('subscriber bug');
    });
  },
);

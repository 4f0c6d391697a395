/**
 * A node whose server API takes its calls from a broker (`consume`) is not ready while that
 * consumer cannot read: /readyz answers 503 `server-api-consumer-unavailable` (so a load balancer
 * or Kubernetes takes the node out) from the start until the consumer first reads, and from a
 * lost broker until it reads again. A node without a consumer is not affected. Private
 * redis-server and nats-server processes are killed and started again; a relay holds the
 * consumer's first connection to show the start.
 */
import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ServerApi } from '../../src/server-api/index.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { withRedis } from '../support/brokers.js';
import { httpGet } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { hasProgram } from '../support/server-processes.js';
import { waitFor, within } from '../support/waiting.js';
import { PrivateNats } from './private-nats.js';
import { PrivateRedis } from './private-redis.js';
import { asUser, post, startApi, userOptions } from './support.js';

const mustRun = process.env['CI'] === 'true';
const hasRedisServer = hasProgram('redis-server');
const hasNatsServer = hasProgram('nats-server');
const res = new Resources();
const apis: ServerApi[] = [];
const relays: HeldRelay[] = [];

afterEach(async () => {
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await Promise.all(relays.splice(0).map((relay) => relay.close()));
  await res.cleanup();
});

/** Each broker test waits for a few state changes, each within waitFor's own deadline. */
const TIMEOUT_MS = 60_000;

const NOT_READY = 'server-api-consumer-unavailable';

/** A gateway (probes not rate limited: the tests poll /readyz) and its /readyz. */
async function node() {
  const running = await res.gateway({
    ...userOptions(),
    limits: { probeRequestsPerSecondPerIp: 0 },
  } as GatewayOptions<{ user?: string }>);
  const readyz = async (): Promise<{ status: number; body: unknown }> => {
    const { status, body } = await httpGet(`${running.httpUrl}/readyz`);
    return { status, body: body === '' ? undefined : JSON.parse(body) };
  };
  /** Wait until /readyz answers `status` with `reason`. */
  const answers = (status: number, reason: string) => {
    let last: unknown;
    return waitFor(
      async () => {
        const seen = await readyz();
        last = seen;
        return seen.status === status && (seen.body as { status?: string })?.status === reason;
      },
      () => `/readyz ${status} ${reason} (seen ${JSON.stringify(last)})`,
    );
  };
  return { running, readyz, answers };
}

/**
 * A TCP relay to 127.0.0.1:`targetPort` that holds every connection it accepts, reading and
 * forwarding nothing, until `open()`: a broker the consumer reached but that has not answered.
 */
class HeldRelay {
  port = 0;
  private opened = false;
  readonly held: Socket[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly server: Server = createServer((inbound) => {
    this.track(inbound);
    if (this.opened) this.relay(inbound);
    else this.held.push(inbound);
  });

  constructor(private readonly targetPort: number) {}

  async start(): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.address() as { port: number }).port;
    return `127.0.0.1:${this.port}`;
  }

  /** The connections held so far (and every later one) go through to the target. */
  open(): void {
    this.opened = true;
    for (const inbound of this.held.splice(0)) this.relay(inbound);
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  private relay(inbound: Socket): void {
    const outbound = this.track(connect({ host: '127.0.0.1', port: this.targetPort }));
    inbound.once('close', () => outbound.destroy());
    outbound.once('close', () => inbound.destroy());
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  }

  private track(socket: Socket): Socket {
    this.sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('close', () => this.sockets.delete(socket));
    return socket;
  }
}

async function heldRelay(targetPort: number): Promise<{ relay: HeldRelay; address: string }> {
  const relay = new HeldRelay(targetPort);
  relays.push(relay);
  return { relay, address: await relay.start() };
}

it('a server API without a consumer leaves /readyz as it was', async () => {
  const { running, readyz } = await node();
  apis.push(await startApi(running.gateway));
  expect(await readyz()).toEqual({ status: 200, body: { status: 'ready', sessions: 0 } });
});

describe.skipIf(!hasRedisServer && !mustRun)('/readyz with a Redis stream consumer', () => {
  let redis: PrivateRedis;

  beforeAll(async () => {
    if (!hasRedisServer) return;
    redis = await PrivateRedis.start();
  });

  afterAll(async () => {
    await redis?.stop();
  });

  it(
    'is 503 until the consumer first reads, then 200',
    async () => {
      const { running, readyz, answers } = await node();
      expect((await readyz()).status).toBe(200);
      const { relay, address } = await heldRelay(redis.port);
      const starting = startApi(running.gateway, {
        consume: { redisStream: `readiness-${process.pid}-1`, url: `redis://${address}` },
      });
      starting.catch(() => undefined);
      await answers(503, NOT_READY);
      expect(await readyz()).toEqual({ status: 503, body: { status: NOT_READY, sessions: 0 } });
      expect(running.gateway.isReady).toBe(false);
      relay.open();
      const api = await within(starting, 'the server API to start');
      apis.push(api);
      expect(api.consumer).toEqual({ kind: 'redis', up: true });
      expect(await readyz()).toEqual({ status: 200, body: { status: 'ready', sessions: 0 } });
      expect(running.gateway.isReady).toBe(true);
    },
    TIMEOUT_MS,
  );

  it(
    'with consume.readiness false, leaves /readyz at 200 while the consumer is not up',
    async () => {
      const { running, readyz } = await node();
      const { relay, address } = await heldRelay(redis.port);
      const starting = startApi(running.gateway, {
        consume: {
          redisStream: `readiness-${process.pid}-6`,
          url: `redis://${address}`,
          readiness: false,
        },
      });
      starting.catch(() => undefined);
      // The consumer's connection is held: it is not up, and the node is ready all the same.
      await waitFor(() => relay.held.length > 0, 'the consumer to reach the relay');
      expect(await readyz()).toEqual({ status: 200, body: { status: 'ready', sessions: 0 } });
      relay.open();
      const api = await within(starting, 'the server API to start');
      apis.push(api);
      expect(api.consumer).toEqual({ kind: 'redis', up: true });
      expect((await readyz()).status).toBe(200);
    },
    TIMEOUT_MS,
  );

  it(
    'leaves the node ready when the consumer could not start',
    async () => {
      const { running, readyz, answers } = await node();
      const { relay, address } = await heldRelay(redis.port);
      const starting = startApi(running.gateway, {
        consume: { redisStream: `readiness-${process.pid}-2`, url: `redis://${address}` },
      });
      starting.catch(() => undefined);
      await answers(503, NOT_READY);
      await relay.close();
      await expect(within(starting, 'the server API to fail')).rejects.toThrow();
      expect(await readyz()).toEqual({ status: 200, body: { status: 'ready', sessions: 0 } });
    },
    TIMEOUT_MS,
  );

  it(
    'is 503 while its reads fail (the stream key holds a string), 200 once they work',
    async () => {
      const { running, readyz, answers } = await node();
      const stream = `readiness-${process.pid}-4`;
      const api = await startApi(running.gateway, {
        consume: { redisStream: stream, url: redis.url },
      });
      apis.push(api);
      expect((await readyz()).status).toBe(200);
      // SET replaces the stream and its group at once: every read fails.
      await withRedis(redis.url, (writer) => writer.set(stream, 'not a stream'));
      await answers(503, NOT_READY);
      expect(api.consumer).toEqual({ kind: 'redis', up: false });
      // Gone: the group is made again from the stream's start, and the consumer reads.
      await withRedis(redis.url, (writer) => writer.del(stream));
      await answers(200, 'ready');
      expect(api.consumer).toEqual({ kind: 'redis', up: true });
    },
    TIMEOUT_MS,
  );

  it(
    'stays 503 while the server API closes (its calls in flight finishing), 200 once closed',
    async () => {
      const { running, readyz, answers } = await node();
      const api = await startApi(running.gateway, {
        consume: { redisStream: `readiness-${process.pid}-5`, url: redis.url },
      });
      apis.push(api);
      await answers(200, 'ready');
      // A call through the server API held by its client until released: close waits for it.
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let called!: () => void;
      const reached = new Promise<void>((resolve) => (called = resolve));
      const client = res.client(asUser(running.url, 'ann'));
      client.method('hold', async () => {
        called();
        await held;
        return 'done';
      });
      await client.call('rpc.ping');
      const session = [...running.gateway.sessions.values()][0]!;
      const answer = post(api.url, 'callClient', { sessionId: session.id, method: 'hold' });
      await within(reached, 'the client to be called');
      const closing = api.close();
      try {
        await answers(503, NOT_READY);
        expect(api.consumer).toEqual({ kind: 'redis', up: false });
      } finally {
        release();
      }
      // callClient answers with the client's result in `result`.
      expect((await within(answer, 'the held call to be answered')).body?.result).toEqual({
        result: 'done',
      });
      await within(closing, 'the server API to close');
      expect(await readyz()).toEqual({ status: 200, body: { status: 'ready', sessions: 1 } });
    },
    TIMEOUT_MS,
  );

  it(
    'is 503 while Redis is down, 200 once the consumer reads again, 200 once closed',
    async () => {
      const { running, readyz, answers } = await node();
      const api = await startApi(running.gateway, {
        consume: { redisStream: `readiness-${process.pid}-3`, url: redis.url },
      });
      apis.push(api);
      expect(await readyz()).toEqual({ status: 200, body: { status: 'ready', sessions: 0 } });

      await redis.stop();
      try {
        await answers(503, NOT_READY);
        expect(await readyz()).toEqual({ status: 503, body: { status: NOT_READY, sessions: 0 } });
        expect(api.consumer).toEqual({ kind: 'redis', up: false });
      } finally {
        await redis.run();
      }
      // Back empty: the group is made again, and the consumer reads.
      await answers(200, 'ready');
      expect(api.consumer).toEqual({ kind: 'redis', up: true });

      // Down again, then closed: a node without a consumer is ready.
      await redis.stop();
      try {
        await answers(503, NOT_READY);
        await within(api.close(), 'the server API to close');
        expect(await readyz()).toEqual({ status: 200, body: { status: 'ready', sessions: 0 } });
      } finally {
        await redis.run();
      }
    },
    TIMEOUT_MS,
  );
});

describe.skipIf(!hasNatsServer && !mustRun)('/readyz with a NATS subject consumer', () => {
  let nats: PrivateNats;

  beforeAll(async () => {
    if (!hasNatsServer) return;
    nats = await PrivateNats.start();
  });

  afterAll(async () => {
    await nats?.stop();
  });

  it(
    'is 503 until the consumer first subscribes, then 200',
    async () => {
      const { running, readyz, answers } = await node();
      const { relay, address } = await heldRelay(nats.port);
      const starting = startApi(running.gateway, {
        consume: { natsSubject: `readiness.${process.pid}.1`, url: `nats://${address}` },
      });
      starting.catch(() => undefined);
      await answers(503, NOT_READY);
      relay.open();
      const api = await within(starting, 'the server API to start');
      apis.push(api);
      expect(api.consumer).toEqual({ kind: 'nats', up: true });
      expect(await readyz()).toEqual({ status: 200, body: { status: 'ready', sessions: 0 } });
    },
    TIMEOUT_MS,
  );

  it(
    'is 503 while NATS is down, 200 once the consumer is back',
    async () => {
      const { running, readyz, answers } = await node();
      const api = await startApi(running.gateway, {
        consume: { natsSubject: `readiness.${process.pid}.2`, url: nats.url },
      });
      apis.push(api);
      expect(await readyz()).toEqual({ status: 200, body: { status: 'ready', sessions: 0 } });

      await nats.stop();
      try {
        await answers(503, NOT_READY);
        expect(await readyz()).toEqual({ status: 503, body: { status: NOT_READY, sessions: 0 } });
        expect(api.consumer).toEqual({ kind: 'nats', up: false });
      } finally {
        await nats.run();
      }
      await answers(200, 'ready');
      expect(api.consumer).toEqual({ kind: 'nats', up: true });
    },
    TIMEOUT_MS,
  );
});

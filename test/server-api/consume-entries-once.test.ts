/**
 * The Redis stream consumer handles each entry once, and none is left behind: entries written
 * before any gateway read the stream are handled (the group starts at the stream's start when
 * no group reads it); a group deleted alone is made again after the last entry read, not from
 * the start (nothing handled runs again); entries a read took whose reply the connection lost
 * run at once and in order, not after a takeover; a request handled for longer than
 * `claimIdleMs` is not taken over by another node and run twice. Over NATS, a reply larger
 * than the server's max_payload reaches its requester as an error, not as silence. A failed
 * consumed request is logged by id, code and message, never with its reply.
 *
 * Real Redis (127.0.0.1:6379, a relay in front of it to lose a reply) and NATS (4222), a
 * consumer started as the server API starts it, with an answer that records what it ran.
 */
import { connect } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveServerApiConfig } from '../../src/server-api/config.js';
import { failureReply } from '../../src/server-api/busy-reply.js';
import { startConsumer } from '../../src/server-api/consume.js';
import type { Consumer } from '../../src/server-api/consume.js';
import { ConsumerFigures } from '../../src/server-api/consumer-metrics.js';
import { NATS_URL, REDIS_URL } from '../support/brokers.js';
import { CaptureLogger } from '../support/logging.js';
import { canConnect } from '../support/network.js';
import { sleep } from '../support/promises.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { waitFor } from '../support/waiting.js';
import { API_KEY } from './support.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const natsUp = await canConnect(4222);
const tag = `once-${process.pid}-${Date.now().toString(36)}`;
let streams = 0;
const admin = redisUp || mustRun ? new Redis(REDIS_URL, { lazyConnect: true }) : undefined;
const consumers: Consumer[] = [];
const relays: TcpRelay[] = [];

afterAll(async () => {
  await Promise.all(consumers.splice(0).map((c) => c.close()));
  await Promise.all(relays.splice(0).map((r) => r.cut()));
  if (!admin || admin.status !== 'ready') return;
  const keys = await admin.keys(`${tag}:*`);
  if (keys.length > 0) await admin.del(...keys);
  admin.disconnect();
});

/** A request of the stream's numbering: notification `n` with params [k]. */
const request = (k: number) => JSON.stringify({ jsonrpc: '2.0', method: 'n', params: [k] });
const numberOf = (text: string) => (JSON.parse(text) as { params: [number] }).params[0];

/**
 * A consumer of `stream` (read through `url`): each request it runs is pushed to `ran` at once,
 * and answered after `holdMs` (by request number; 0 by default).
 */
async function consumer(
  stream: string,
  ran: number[],
  options: { url?: string; claimIdleMs?: number; holdMs?: (k: number) => number } = {},
) {
  const config = resolveServerApiConfig({
    listen: { host: '127.0.0.1', port: 0 },
    keys: [API_KEY],
    consume: {
      redisStream: stream,
      url: options.url ?? REDIS_URL,
      maxConcurrent: 4,
      ...(options.claimIdleMs ? { claimIdleMs: options.claimIdleMs } : {}),
    },
  });
  const started = await startConsumer(
    config.consume!,
    undefined,
    {
      answer: async (text) => {
        const k = numberOf(text);
        ran.push(k);
        await sleep(options.holdMs?.(k) ?? 0);
        return undefined;
      },
      busy: () => '',
      failure: () => '',
      maxBytes: 1 << 20,
      figures: new ConsumerFigures('redis'),
    },
    new CaptureLogger(),
  );
  consumers.push(started);
  return started;
}

const newStream = () => `${tag}:${++streams}`;

describe.skipIf(!redisUp && !mustRun)('the Redis stream consumer: each entry once', () => {
  it('handles the entries written before any gateway read the stream, in order', async () => {
    await admin!.connect().catch(() => undefined);
    const stream = newStream();
    await admin!.xadd(stream, '*', 'request', request(1));
    await admin!.xadd(stream, '*', 'request', request(2));
    const ran: number[] = [];
    await consumer(stream, ran);
    await admin!.xadd(stream, '*', 'request', request(3));
    await waitFor(() => ran.length === 3, 'three entries run');
    expect(ran).toEqual([1, 2, 3]);
  });

  it("starts at the stream's end when another group reads it (a group renamed)", async () => {
    const stream = newStream();
    await admin!.xgroup('CREATE', stream, 'another-group', '$', 'MKSTREAM');
    await admin!.xadd(stream, '*', 'request', request(1));
    const ran: number[] = [];
    await consumer(stream, ran);
    await admin!.xadd(stream, '*', 'request', request(2));
    await waitFor(() => ran.length > 0, 'an entry run');
    // Read in the stream's order: had entry 1 been read, it would have run first.
    expect(ran).toEqual([2]);
  });

  it('a group deleted alone is made again after the last entry read: none runs twice', async () => {
    const stream = newStream();
    const ran: number[] = [];
    await consumer(stream, ran);
    for (const k of [1, 2]) await admin!.xadd(stream, '*', 'request', request(k));
    await waitFor(() => ran.length === 2, 'two entries run');
    await admin!.xgroup('DESTROY', stream, 'wsrpc-gateway');
    await admin!.xadd(stream, '*', 'request', request(3));
    await waitFor(() => ran.includes(3), 'the entry written after the loss run');
    expect(ran).toEqual([1, 2, 3]);
  });

  it('entries a read took whose reply was lost run at once, before later ones', async () => {
    const stream = newStream();
    const relay = new TcpRelay(6379);
    relays.push(relay);
    const port = await relay.start();
    const ran: number[] = [];
    // A takeover would find them only after a day: what runs them here is the read again.
    await consumer(stream, ran, { url: `redis://127.0.0.1:${port}`, claimIdleMs: 86_400_000 });
    await waitFor(
      async () => ((await admin!.xinfo('GROUPS', stream)) as unknown[]).length === 1,
      'the group',
    );
    relay.loseAnswerTo('evalsha');
    await admin!.xadd(stream, '*', 'request', request(1));
    await waitFor(() => ran.length === 1, 'the entry whose read lost its reply run');
    await admin!.xadd(stream, '*', 'request', request(2));
    await waitFor(() => ran.length === 2, 'the next entry run');
    expect(ran).toEqual([1, 2]);
    await waitFor(
      async () => ((await admin!.xpending(stream, 'wsrpc-gateway')) as [number])[0] === 0,
      'both acknowledged',
    );
  });

  it('a consumer that closes leaves the group: consumers do not pile up start after start', async () => {
    const stream = newStream();
    const ran: number[] = [];
    for (let start = 1; start <= 3; start++) {
      const started = await consumer(stream, ran);
      await admin!.xadd(stream, '*', 'request', request(start));
      await waitFor(() => ran.length === start, `entry ${start} run`);
      await waitFor(
        async () => ((await admin!.xpending(stream, 'wsrpc-gateway')) as [number])[0] === 0,
        'acknowledged',
      );
      await started.close();
    }
    expect(ran).toEqual([1, 2, 3]);
    expect(await admin!.xinfo('CONSUMERS', stream, 'wsrpc-gateway')).toEqual([]);
  });

  it('a request handled for longer than claimIdleMs is marked not idle, and runs once on two nodes', async () => {
    const stream = newStream();
    const ran: number[] = [];
    // Two nodes of the group, taking over what was idle 3 s; entry 1 runs 9 s. Marked not idle
    // every second while it runs, it is never idle for two: without that it would be, for a
    // whole second, before any takeover could find it.
    const claimIdleMs = 3_000;
    const options = { claimIdleMs, holdMs: (k: number) => (k === 1 ? 9_000 : 0) };
    await consumer(stream, ran, options);
    // Half a round apart: a takeover is tried twice a round, by one node or the other.
    await sleep(claimIdleMs / 2);
    await consumer(stream, ran, options);
    await admin!.xadd(stream, '*', 'request', request(1));
    // Its idle time, as a takeover sees it, looked at every few ms while it runs.
    let maxIdle = 0;
    await waitFor(async () => {
      const pending = (await admin!.xpending(stream, 'wsrpc-gateway', '-', '+', 10)) as [
        string,
        string,
        number,
        number,
      ][];
      for (const [, , idle] of pending) maxIdle = Math.max(maxIdle, idle);
      return pending.length === 0 && ran.length > 0;
    }, 'entry 1 run and acknowledged');
    expect(maxIdle).toBeLessThan((claimIdleMs * 2) / 3);
    expect(ran).toEqual([1]);
  });
});

describe.skipIf(!natsUp && !mustRun)('the NATS consumer: a reply over max_payload', () => {
  it('reaches its requester as -32603 under its id, and the failure is logged without the reply', async () => {
    const subject = `${tag}.api`;
    const config = resolveServerApiConfig({
      listen: { host: '127.0.0.1', port: 0 },
      keys: [API_KEY],
      consume: { natsSubject: subject, url: NATS_URL },
    });
    const logger = new CaptureLogger();
    const figures = new ConsumerFigures('nats');
    const bigReply = `{"jsonrpc":"2.0","id":7,"result":"${'x'.repeat(2 << 20)}"}`;
    const started = await startConsumer(
      config.consume!,
      undefined,
      {
        // Request 7 is answered beyond the server's max_payload; request 8 fails, its reply
        // holding a large result text beside the error.
        answer: (text) => {
          const { id } = JSON.parse(text) as { id: number };
          return Promise.resolve(
            id === 7
              ? bigReply
              : `{"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"Invalid params","data":"${'y'.repeat(1000)}"}}`,
          );
        },
        busy: () => '',
        failure: (text, error) => failureReply(text, {}, error),
        maxBytes: 1 << 20,
        figures,
      },
      logger,
    );
    consumers.push(started);
    const nc = await connect({ servers: NATS_URL });
    try {
      const reply = await nc.request(
        subject,
        '{"jsonrpc":"2.0","id":7,"method":"history","params":{"topic":"t"}}',
        { timeout: 10_000 },
      );
      const body = JSON.parse(reply.string()) as {
        id: number;
        error: { code: number; data: Record<string, unknown> };
      };
      expect(body.id).toBe(7);
      expect(body.error.code).toBe(-32603);
      expect(body.error.data).toMatchObject({
        reason: 'reply too large',
        bytes: Buffer.byteLength(bigReply),
        maxPayload: nc.info!.max_payload,
        handled: true,
      });
      expect(figures.failures.reply_too_large).toBe(1);

      await nc.request(subject, '{"jsonrpc":"2.0","id":8,"method":"x"}', { timeout: 10_000 });
      const failed = logger.withMessage('server API: a consumed request failed');
      expect(failed.map((r) => r.obj)).toEqual([
        expect.objectContaining({
          errors: [{ id: 8, code: -32602, message: 'Invalid params' }],
          failed: 1,
        }),
      ]);
      expect(JSON.stringify(failed)).not.toContain('yyyy');
    } finally {
      await nc.close();
    }
  });
});

/**
 * An entry that every node taking it dies or stalls with (a poison request) is not taken over
 * for ever: one taken over once it has been delivered more than `consume.maxDeliveries` times
 * is not handled; it is copied to the dead-letter stream with its id, stream, group and
 * delivery count, acknowledged, logged and counted. Every other entry is handled once.
 *
 * Against its model: entries another consumer took and left (their delivery counts set with
 * XCLAIM … RETRYCOUNT, idle for an hour so the next takeover takes them) and new entries, any
 * maxDeliveries, with a dead-letter stream or without. Real Redis (127.0.0.1:6379).
 */
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveServerApiConfig } from '../../src/server-api/config.js';
import { startConsumer } from '../../src/server-api/consume.js';
import { ConsumerFigures } from '../../src/server-api/consumer-metrics.js';
import { REDIS_URL } from '../support/brokers.js';
import { CaptureLogger } from '../support/logging.js';
import { canConnect } from '../support/network.js';
import { waitFor } from '../support/waiting.js';
import { API_KEY } from './support.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const tag = `poison-${process.pid}-${Date.now().toString(36)}`;
const GROUP = 'wsrpc-gateway';
let streams = 0;
const admin = redisUp || mustRun ? new Redis(REDIS_URL, { lazyConnect: true }) : undefined;

afterAll(async () => {
  if (!admin || admin.status !== 'ready') return;
  const keys = await admin.keys(`${tag}:*`);
  if (keys.length > 0) await admin.del(...keys);
  admin.disconnect();
});

const request = (k: number) => JSON.stringify({ jsonrpc: '2.0', method: 'n', params: [k] });

interface Case {
  /** Per entry: undefined, new (never read); a number, the deliveries before the takeover. */
  entries: (number | undefined)[];
  maxDeliveries: number;
  deadLetter: boolean;
}

async function run({ entries, maxDeliveries, deadLetter }: Case): Promise<void> {
  const stream = `${tag}:${++streams}`;
  const dead = `${stream}:dead`;
  await admin!.xgroup('CREATE', stream, GROUP, '0', 'MKSTREAM');
  const ids: string[] = [];
  // The entries another consumer took first (delivered once), then the new ones.
  const taken = entries.flatMap((n, k) => (n === undefined ? [] : [k]));
  for (const k of taken) ids[k] = (await admin!.xadd(stream, '*', 'request', request(k)))!;
  if (taken.length > 0) {
    await admin!.xreadgroup('GROUP', GROUP, 'gone', 'COUNT', taken.length, 'STREAMS', stream, '>');
    for (const k of taken) {
      // Its delivery count, and idle for an hour: the consumer's first takeover takes it.
      await admin!.xclaim(
        stream,
        GROUP,
        'gone',
        0,
        ids[k]!,
        'IDLE',
        3_600_000,
        'RETRYCOUNT',
        entries[k]!,
        'JUSTID',
      );
    }
  }
  for (let k = 0; k < entries.length; k++) {
    if (entries[k] === undefined) ids[k] = (await admin!.xadd(stream, '*', 'request', request(k)))!;
  }
  // The model: a takeover adds a delivery; past maxDeliveries, not handled.
  const deliveriesAtTakeover = (k: number) => entries[k]! + 1;
  const poisoned = taken.filter((k) => deliveriesAtTakeover(k) > maxDeliveries);
  const handled = entries.map((_, k) => k).filter((k) => !poisoned.includes(k));

  const config = resolveServerApiConfig({
    listen: { host: '127.0.0.1', port: 0 },
    keys: [API_KEY],
    consume: {
      redisStream: stream,
      url: REDIS_URL,
      claimIdleMs: 60_000,
      maxDeliveries,
      deadLetterStream: deadLetter ? dead : false,
    },
  });
  const ran: number[] = [];
  const figures = new ConsumerFigures('redis');
  const logger = new CaptureLogger();
  const consumer = await startConsumer(
    config.consume!,
    undefined,
    {
      answer: (text) => {
        ran.push((JSON.parse(text) as { params: [number] }).params[0]);
        return Promise.resolve(undefined);
      },
      busy: () => '',
      failure: () => '',
      maxBytes: 1 << 20,
      figures,
    },
    logger,
  );
  try {
    const settled = async () =>
      ran.length === handled.length &&
      figures.consumed.delivered_too_often === poisoned.length &&
      ((await admin!.xpending(stream, GROUP)) as [number])[0] === 0;
    await waitFor(settled, 'every entry handled or sent to the dead letters');
  } finally {
    await consumer.close();
  }
  expect([...ran].sort((a, b) => a - b)).toEqual(handled);
  const letters = deadLetter ? await admin!.xrange(dead, '-', '+') : [];
  expect(
    letters.map(([, fields]) =>
      Object.fromEntries(
        fields.flatMap((value, i) => (i % 2 === 0 ? [[value, fields[i + 1]]] : [])),
      ),
    ),
  ).toEqual(
    deadLetter
      ? poisoned.map((k) => ({
          request: request(k),
          id: ids[k],
          stream,
          group: GROUP,
          deliveries: String(deliveriesAtTakeover(k)),
        }))
      : [],
  );
  if (!deadLetter) expect(await admin!.exists(dead)).toBe(0);
  const logged = logger.records.filter((r) => /after maxDeliveries/.test(r.msg ?? ''));
  expect(
    logged.map((r) => {
      const obj = r.obj as Record<string, unknown>;
      return [obj['id'], obj['deliveries']];
    }),
  ).toEqual(poisoned.map((k) => [ids[k], deliveriesAtTakeover(k)]));
}

describe.skipIf(!redisUp && !mustRun)(
  'the Redis stream consumer: entries delivered too often',
  () => {
    it('sends an entry taken over past maxDeliveries to the dead letters, and handles the rest once', async () => {
      await admin!.connect().catch(() => undefined);
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            entries: fc.array(fc.option(fc.integer({ min: 1, max: 8 }), { nil: undefined }), {
              minLength: 1,
              maxLength: 6,
            }),
            maxDeliveries: fc.integer({ min: 1, max: 6 }),
            deadLetter: fc.boolean(),
          }),
          run,
        ),
        { numRuns: 25 },
      );
    }, 120_000);
  },
);

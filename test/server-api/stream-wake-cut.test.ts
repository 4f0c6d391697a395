/**
 * The wake-up connection of an idle Redis stream consumer (StreamWake) arms itself on each
 * connection: CLIENT ID, CLIENT TRACKING … REDIRECT <id> BCAST PREFIX <stream>, SUBSCRIBE. A
 * connection cut while one of those is under way must not leave the consumer believing Redis
 * refused tracking (it would poll the stream for the rest of its life): once a connection holds,
 * the wake watches again, and a write to the stream ends a wait. A relay in front of the real
 * Redis cuts the connection on which a chosen arming command is sent, before it reaches Redis,
 * so the command is under way when the connection drops. The fast-check model cuts at any of
 * the arming steps, one to three times in a row.
 */
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StreamWake } from '../../src/server-api/stream-wake.js';
import { REDIS_URL } from '../support/brokers.js';
import { logged, captureLogger } from '../support/logging.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { waitFor } from '../support/waiting.js';

/** The arming commands, as the bytes that name each on the wire (RESP, any case). */
const ARMING = {
  id: /\r\nID\r\n/i,
  tracking: /\r\nTRACKING\r\n/i,
  subscribe: /\r\nSUBSCRIBE\r\n/i,
} as const;
type Step = keyof typeof ARMING;

/**
 * A relay to the shared Redis that cuts, one after the other, the connections on which the
 * commands of `cuts` are sent; `pending()` counts the cuts not made yet.
 */
function cuttingRelay(cuts: Step[]): { relay: TcpRelay; pending: () => number } {
  const left = [...cuts];
  const relay = new TcpRelay(Number(new URL(REDIS_URL).port), (chunk) => {
    const next = left[0];
    if (next === undefined || !ARMING[next].test(chunk.toString('latin1'))) return false;
    left.shift();
    return true;
  });
  return { relay, pending: () => left.length };
}

let admin: Redis;
let streams = 0;

beforeAll(() => {
  admin = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
});

afterAll(() => {
  admin.disconnect();
});

/**
 * A StreamWake through a relay that makes `cuts`; once every cut is made and the wake watches,
 * a write to its stream must end a wait (the test's time-out is the failure otherwise). Checks
 * that it never took a cut for Redis refusing tracking.
 */
async function watchesAfter(cuts: Step[]): Promise<void> {
  const { relay, pending } = cuttingRelay(cuts);
  await relay.start();
  const stream = `wake-cut-${process.pid}-${++streams}`;
  const base = new Redis(`redis://127.0.0.1:${relay.port}`, {
    lazyConnect: true,
    // A cut is made again within milliseconds (ioredis waits 50 ms × attempts by default).
    retryStrategy: () => 10,
  });
  base.on('error', () => undefined);
  const { logger, records } = captureLogger();
  const wake = new StreamWake(base, stream, logger);
  try {
    await waitFor(
      () => pending() === 0 && wake.watching,
      () =>
        `the wake watching after cuts at ${cuts.join(', ')} (${cuts.length - pending()} made; refused: ` +
        `${logged(records, 'server API: Redis refused CLIENT TRACKING on the stream; the consumer polls it instead').length})`,
      10_000,
    );
    wake.clear();
    const woken = wake.wait(2 ** 31 - 1);
    await admin.xadd(stream, '*', 'request', '{}');
    await woken;
    expect(
      logged(
        records,
        'server API: Redis refused CLIENT TRACKING on the stream; the consumer polls it instead',
      ),
    ).toEqual([]);
  } finally {
    wake.close();
    base.disconnect();
    await relay.cut();
    await admin.del(stream);
  }
}

describe('a Redis stream wake-up connection cut while it arms', () => {
  it.each(['id', 'tracking', 'subscribe'] as const)(
    'watches again after a cut while %s is under way',
    async (step) => {
      await watchesAfter([step]);
    },
  );

  it('model: for any cuts at any arming steps, it watches again and a write wakes it', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom<Step>('id', 'tracking', 'subscribe'), {
          minLength: 1,
          maxLength: 3,
        }),
        async (cuts) => {
          await watchesAfter(cuts);
        },
      ),
      { numRuns: 12, endOnFailure: true },
    );
  }, 120_000);
});

/**
 * The wake-up connection of an idle Redis stream consumer (StreamWake) arms itself on each
 * connection: CLIENT ID, CLIENT TRACKING … REDIRECT <id> BCAST PREFIX <stream>, SUBSCRIBE. A
 * connection cut while one of those is under way must not leave the consumer believing Redis
 * refused tracking (it would poll the stream for the rest of its life): once a connection holds,
 * the wake watches again, and a write to the stream ends a wait. A relay in front of the real
 * Redis cuts the connection on which a chosen arming command is sent, before it reaches Redis,
 * so the command is under way when the connection drops. The wake watches only once armed: a
 * command of the arming held, unanswered, it does not watch yet (a write then would go unseen).
 * The fast-check model cuts at any of the arming steps, up to three times in a row, then holds
 * any of the last arming's commands.
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
 * What happens to the connection on which an arming step's command is sent: cut there, or the
 * command held, unanswered, until the test has looked at the wake (it must not watch yet: a
 * write then would go unseen), then let through.
 */
type Fault = { step: Step; fault: 'cut' | 'hold' };

/**
 * A relay to the shared Redis that makes `faults`, one after the other, on the connections on
 * which their steps' commands are sent; `pending()` counts the faults not made yet, `holding()`
 * says whether a command is held now.
 */
function faultyRelay(faults: Fault[]): {
  relay: TcpRelay;
  pending: () => number;
  holding: () => boolean;
} {
  const left = [...faults];
  let held = false;
  const relay: TcpRelay = new TcpRelay(Number(new URL(REDIS_URL).port), (chunk) => {
    const next = left[0];
    if (next === undefined || !ARMING[next.step].test(chunk.toString('latin1'))) return false;
    left.shift();
    if (next.fault === 'cut') return true;
    // Held from this chunk on (the relay reads `hold` after asking), until the test releases it.
    relay.hold();
    held = true;
    return false;
  });
  const release = relay.release.bind(relay);
  relay.release = () => {
    held = false;
    release();
  };
  return { relay, pending: () => left.length, holding: () => held };
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
 * A StreamWake through a relay that makes `faults`; while a command of its arming is held, it
 * must not watch; once every fault is made and the wake watches, a write to its stream must end
 * a wait (the test's time-out is the failure otherwise). Checks that it never took a cut for
 * Redis refusing tracking.
 */
async function watchesAfter(faults: Fault[]): Promise<void> {
  const { relay, pending, holding } = faultyRelay(faults);
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
  /** Whether the wake watched while an arming command was held, at each hold. */
  const watchingWhileHeld: boolean[] = [];
  try {
    await waitFor(
      () => {
        if (holding()) {
          watchingWhileHeld.push(wake.watching);
          relay.release();
          return false;
        }
        return pending() === 0 && wake.watching;
      },
      () =>
        `the wake watching after ${faults.map((f) => `${f.fault} at ${f.step}`).join(', ')} (${faults.length - pending()} made; refused: ` +
        `${logged(records, 'server API: Redis refused CLIENT TRACKING on the stream; the consumer polls it instead').length})`,
      10_000,
    );
    expect(watchingWhileHeld).toEqual(faults.filter((f) => f.fault === 'hold').map(() => false));
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
    relay.release();
    base.disconnect();
    await relay.cut();
    await admin.del(stream);
  }
}

const steps: Step[] = ['id', 'tracking', 'subscribe'];

describe('a Redis stream wake-up connection cut while it arms', () => {
  it.each(steps)('watches again after a cut while %s is under way', async (step) => {
    await watchesAfter([{ step, fault: 'cut' }]);
  });

  it.each(steps)('does not watch while %s is under way, held', async (step) => {
    await watchesAfter([{ step, fault: 'hold' }]);
  });

  it('model: for any cuts and holds at any arming steps, it watches only once armed, and a write wakes it', async () => {
    // Cuts first (each makes the arming start over on the next connection), then holds, in the
    // order the last arming sends its commands (a held command is let through: that arming goes
    // on to its end, so no fault after a hold but a later step's hold is ever met).
    const faults = fc
      .tuple(fc.array(fc.constantFrom<Step>(...steps), { maxLength: 3 }), fc.subarray(steps))
      .filter(([cuts, holds]) => cuts.length + holds.length > 0)
      .map(([cuts, holds]): Fault[] => [
        ...cuts.map((step) => ({ step, fault: 'cut' as const })),
        ...holds.map((step) => ({ step, fault: 'hold' as const })),
      ]);
    await fc.assert(
      fc.asyncProperty(faults, async (made) => {
        await watchesAfter(made);
      }),
      { numRuns: 12, endOnFailure: true },
    );
  }, 120_000);
});

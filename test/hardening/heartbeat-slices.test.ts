// The heartbeat's interval cut into slices (src/server/heartbeat.ts), on the Heartbeat itself
// with fake timers: transports over sockets that only record pings and terminations, answering
// each ping (the pong with its payload) or not. No socket is opened.
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Heartbeat, VISITS_PER_TURN } from '../../src/server/heartbeat.js';
import type { HeartbeatVerdict, Watched } from '../../src/server/heartbeat.js';
import { WsTransport } from '../../src/transport/ws-transport.js';
import type { TransportSocket } from '../../src/transport/ws-transport.js';

interface Fake {
  key: string;
  answers: boolean;
  /** The slice (timer ticks so far) it was added in, and those of its pings. */
  addedAt: number;
  pingedAt: number[];
  terminatedAt: number[];
}

/**
 * The gateway's session map as the heartbeat sees it: `add` opens a connection (and tells the
 * heartbeat, as the session table does); a terminated one leaves the map.
 */
function connections() {
  const watched = new Map<string, Watched>();
  const fakes: Fake[] = [];
  const clock = { tick: 0 };
  let visitsNow = 0;
  let heartbeat: Heartbeat | undefined;
  const add = (answers: boolean): Fake => {
    const fake: Fake = {
      key: `s${fakes.length}`,
      answers,
      addedAt: clock.tick,
      pingedAt: [],
      terminatedAt: [],
    };
    const socket = {
      ping(payload: Buffer) {
        visitsNow++;
        fake.pingedAt.push(clock.tick);
        if (fake.answers) transport.onPong(payload);
      },
      terminate() {
        visitsNow++;
        fake.terminatedAt.push(clock.tick);
        watched.delete(fake.key);
      },
    };
    const transport = new WsTransport(socket as unknown as TransportSocket);
    watched.set(fake.key, { transport, close: () => socket.terminate() });
    fakes.push(fake);
    heartbeat?.watch(fake.key);
    return fake;
  };
  const start = (intervalMs: number, onDead: (v: HeartbeatVerdict) => void = () => undefined) =>
    (heartbeat = new Heartbeat(intervalMs, watched, 0, onDead));
  /** Pings and terminations since the last call. */
  const takeVisits = (): number => {
    const n = visitsNow;
    visitsNow = 0;
    return n;
  };
  return { watched, fakes, add, start, takeVisits, clock };
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('heartbeat slices', () => {
  it('pings the connections of a 30 s interval a hundredth at a time, 300 ms apart, each once per interval', () => {
    const { fakes, add, start, takeVisits } = connections();
    for (let i = 0; i < 10_000; i++) add(true);
    const heartbeat = start(30_000);
    try {
      for (let slice = 1; slice <= 100; slice++) {
        vi.advanceTimersByTime(300);
        expect(takeVisits()).toBe(100);
      }
      expect(fakes.every((f) => f.pingedAt.length === 1)).toBe(true);
      vi.advanceTimersByTime(30_000);
      expect(fakes.every((f) => f.pingedAt.length === 2 && f.terminatedAt.length === 0)).toBe(true);
    } finally {
      heartbeat.stop();
    }
  });

  it(`visits a slice of more than ${VISITS_PER_TURN} connections ${VISITS_PER_TURN} per event-loop turn, so the sockets' I/O is served in between`, async () => {
    const { fakes, add, start, takeVisits } = connections();
    const count = 2 * VISITS_PER_TURN + VISITS_PER_TURN / 2;
    for (let i = 0; i < count; i++) add(true);
    // One slice (an interval of 100 ms) holding every connection.
    const heartbeat = start(100);
    const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
    try {
      vi.advanceTimersByTime(100);
      const turns = [takeVisits()];
      // The heartbeat's next turn was queued before this one's, so it has run when this resolves.
      while (turns.length < 5) {
        await nextTurn();
        turns.push(takeVisits());
      }
      expect(turns).toEqual([VISITS_PER_TURN, VISITS_PER_TURN, VISITS_PER_TURN / 2, 0, 0]);
      expect(fakes.every((f) => f.pingedAt.length === 1)).toBe(true);
      // A silent connection is still cut at its next visit, in the turn its place comes.
      fakes[count - 1]!.answers = false;
      vi.advanceTimersByTime(100);
      for (let i = 0; i < 3; i++) await nextTurn();
      vi.advanceTimersByTime(100);
      for (let i = 0; i < 3; i++) await nextTurn();
      expect(fakes[count - 1]!.terminatedAt).toHaveLength(1);
      expect(fakes.slice(0, -1).every((f) => f.terminatedAt.length === 0)).toBe(true);
    } finally {
      heartbeat.stop();
    }
  });

  it('model: slices as even as the connections allow, each connection visited exactly one interval apart whoever opens and closes, the silent ones cut at their second visit', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(50, 250, 1_000, 30_000),
        fc.array(fc.boolean(), { maxLength: 300 }),
        fc.array(fc.tuple(fc.boolean(), fc.nat()), { maxLength: 100 }),
        (intervalMs, first, late) => {
          // A slice of more than VISITS_PER_TURN goes on in setImmediate turns: faked here too,
          // so each advance runs the whole slice.
          vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'setImmediate'] });
          const { watched, fakes, add, start, takeVisits, clock } = connections();
          for (const answers of first) add(answers);
          const dead: HeartbeatVerdict[] = [];
          const heartbeat = start(intervalMs, (v) => dead.push(v));
          const slices = Math.max(1, Math.min(100, Math.floor(intervalMs / 100)));
          const sliceMs = Math.round(intervalMs / slices);
          try {
            // Four intervals; the late ones open during the first, before the slice they name.
            for (let tick = 0; tick < 4 * slices; tick++) {
              for (const [answers, at] of late) if (at % slices === tick) add(answers);
              const opened = fakes.length;
              clock.tick = tick + 1;
              vi.advanceTimersByTime(sliceMs);
              // Each connection has its slice, given in turn: none holds more than its share.
              expect(takeVisits()).toBeLessThanOrEqual(Math.ceil(opened / slices));
            }
            for (const f of fakes) {
              // First visited within an interval of opening.
              expect(f.pingedAt[0]! - f.addedAt).toBeGreaterThan(0);
              expect(f.pingedAt[0]! - f.addedAt).toBeLessThanOrEqual(slices);
              if (f.answers) {
                expect(f.terminatedAt).toEqual([]);
                expect(f.pingedAt.length).toBeGreaterThanOrEqual(3);
                for (let i = 1; i < f.pingedAt.length; i++) {
                  expect(f.pingedAt[i]! - f.pingedAt[i - 1]!).toBe(slices);
                }
              } else {
                expect(f.pingedAt).toHaveLength(1);
                expect(f.terminatedAt).toEqual([f.pingedAt[0]! + slices]);
              }
            }
            expect(dead).toEqual(fakes.filter((f) => !f.answers).map(() => 'missed-pong'));
            expect([...watched.values()]).toHaveLength(fakes.filter((f) => f.answers).length);
          } finally {
            heartbeat.stop();
          }
        },
      ),
      { numRuns: 100 },
    );
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RateLimit, TokenBucket, smallMs } from '../../src/server/token-bucket.js';

/** A clock at an epoch-like time, moved by hand. */
function clock(start = 1_764_633_600_000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => (t += ms) };
}

/** How many tokens `bucket` gives before it refuses (at most `max`). */
function drain(bucket: TokenBucket, max = 1_000): number {
  let n = 0;
  while (n < max && bucket.take()) n++;
  return n;
}

describe('TokenBucket', () => {
  it("a refusal's retryAfterSeconds is when the next token is there: at least 1 s, not a second later", () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0.01, max: 1_000, noNaN: true }),
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.integer({ min: 0, max: 5_000 }), { maxLength: 20 }),
        (perSecond, burst, gaps) => {
          const c = clock();
          const bucket = new TokenBucket(perSecond, burst, c.now);
          for (const gap of gaps) {
            c.advance(gap);
            bucket.take();
          }
          drain(bucket, 100_000);
          const seconds = bucket.retryAfterSeconds();
          expect(Number.isInteger(seconds) && seconds >= 1).toBe(true);
          if (seconds > 1) {
            c.advance((seconds - 1) * 1000);
            expect(bucket.available()).toBeLessThan(1);
            c.advance(1000);
          } else {
            c.advance(1000);
          }
          expect(bucket.take()).toBe(true);
        },
      ),
    );
  });

  it('gives its burst, then refills at its rate from an epoch-time clock', () => {
    const c = clock();
    const bucket = new TokenBucket(10, 5, c.now);
    expect(drain(bucket)).toBe(5);
    c.advance(250); // 2.5 tokens
    expect(drain(bucket)).toBe(2);
    c.advance(50); // 0.5 left + 0.5
    expect(drain(bucket)).toBe(1);
    c.advance(60_000);
    expect(drain(bucket)).toBe(5); // never above the burst
  });

  it('buckets of one shared RateLimit keep their own tokens', () => {
    const c = clock();
    const limit = new RateLimit(10, 3, c.now);
    const a = new TokenBucket(limit);
    c.advance(1_000);
    const b = new TokenBucket(limit);
    expect(drain(a)).toBe(3);
    expect(drain(b)).toBe(3);
    c.advance(100);
    expect(drain(a)).toBe(1);
    expect(drain(b)).toBe(1);
  });

  it('still refills right once the time since the limit was made is past 2^31 ms', () => {
    const c = clock();
    const limit = new RateLimit(1, 2, c.now);
    const bucket = new TokenBucket(limit);
    expect(drain(bucket)).toBe(2);
    c.advance(2 ** 31 + 500);
    expect(drain(bucket)).toBe(2);
    c.advance(999);
    expect(drain(bucket)).toBe(0);
    c.advance(1);
    expect(drain(bucket)).toBe(1);
  });
});

describe('smallMs', () => {
  it('keeps every value (int32 ones as int32)', () => {
    for (const ms of [0, 1, 86_400_000, 2 ** 31 - 1, 2 ** 31, 2 ** 40, 1.5, -1]) {
      expect(smallMs(ms)).toBe(ms);
    }
  });
});

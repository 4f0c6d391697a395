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

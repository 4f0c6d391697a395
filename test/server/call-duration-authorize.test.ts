/**
 * rpc_call_duration_seconds is the time from a call's arrival to its answer: the time its
 * `authorize` hook took is in it, and a call whose hook failed is observed with the time it
 * took, not as a call of 0 s.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/index.js';
import { sampleValue, scrape } from '../support/metrics.js';
import { Resources } from '../support/resources.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** How long (ms) the hook holds each call: long beside what a handler here takes. */
const HOOK_MS = 50;

describe('rpc_call_duration_seconds with an authorize hook', () => {
  it('counts the hook in, for a call it lets through and for one whose hook throws', async () => {
    const hookMs = new Map<string, number>();
    const { gateway, url, httpUrl } = await res.gateway({
      limits: { metricsCacheMs: 0, probeRequestsPerSecondPerIp: 0 },
      authorize: async ({ method }) => {
        const started = performance.now();
        await new Promise((resolve) => setTimeout(resolve, HOOK_MS));
        hookMs.set(method, performance.now() - started);
        if (method === 'bad') throw new Error('hook down');
        return true;
      },
    });
    gateway.method('fast', () => 1);
    gateway.method('bad', () => 1);
    const raw = await openRaw(res, url);
    expect((await raw.request('fast')).result).toBe(1);
    expect((await raw.request('bad')).error?.code).toBe(ErrorCode.InternalError);

    const text = await scrape(httpUrl);
    for (const [method, outcome] of [
      ['fast', 'ok'],
      ['bad', 'error'],
    ] as const) {
      expect(sampleValue(text, 'rpc_calls_total', { method, outcome })).toBe(1);
      expect(sampleValue(text, 'rpc_call_duration_seconds_count', { method })).toBe(1);
      const seconds = sampleValue(text, 'rpc_call_duration_seconds_sum', { method })!;
      expect(seconds).toBeGreaterThanOrEqual(hookMs.get(method)! / 1000);
    }
  });
});

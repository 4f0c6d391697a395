/**
 * POST bodies are charged to their address's limits.bytesPerSecondPerIp bucket (burst twice
 * the larger of maxMessageBytes and messageCostBytes, and at least 2 ms of the rate), as its WebSocket messages are: a body the bucket does not hold is refused
 * 429 with Retry-After before it is parsed, and counted as an `ip-bytes` refusal. Without it an
 * address could ask the event loop to parse some 1 GiB/s through POSTs (1,000 requests of 1 MiB),
 * while its WebSocket connections were held to the budget.
 */
import { afterEach, expect, it } from 'vitest';
import { postByteBuckets } from '../../src/server/address-buckets.js';
import { resolveLimits } from '../../src/server/options.js';
import { scrape, sampleValue } from '../support/metrics.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

async function post(httpUrl: string, body: string) {
  const response = await fetch(`${httpUrl}/rpc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    body: await response.text(),
  };
}

it('bodies past the address byte budget are refused 429 with Retry-After before they are parsed', async () => {
  // A slow refill: 1 KiB/s, bursts of 2 × 4 KiB.
  const { gateway, httpUrl } = await res.gateway({
    limits: { maxMessageBytes: 4096, bytesPerSecondPerIp: 1024, ratePerSecond: 0 },
  });
  let parsed = 0;
  gateway.method('echo', (params) => {
    parsed++;
    return params;
  });
  const body = (n: number) =>
    JSON.stringify({ jsonrpc: '2.0', id: n, method: 'echo', params: ['x'.repeat(3000)] });
  const first = await post(httpUrl, body(1));
  const second = await post(httpUrl, body(2));
  expect([first.status, second.status]).toEqual([200, 200]);
  // The burst (8 KiB) is spent: the third, of some 3 KiB, waits for the refill.
  const third = await post(httpUrl, body(3));
  expect(third.status).toBe(429);
  expect(Number(third.retryAfter)).toBeGreaterThanOrEqual(1);
  expect(parsed).toBe(2);
  const metrics = await scrape(httpUrl);
  expect(sampleValue(metrics, 'rpc_rejected_upgrades_total', { reason: 'ip-bytes' })).toBe(1);
});

it("a batch's members after the first cost messageCostBytes each, as on a WebSocket", async () => {
  // Bursts of 2 × 4 KiB; a batch of 40 pings is some 1.5 KiB of text, and costs 40 × 256 B.
  const { httpUrl } = await res.gateway({
    limits: { maxMessageBytes: 4096, bytesPerSecondPerIp: 1024, ratePerSecond: 0, maxBatch: 40 },
  });
  const batch = Array.from({ length: 40 }, (_, i) => ({
    jsonrpc: '2.0',
    id: i,
    method: 'rpc.ping',
  }));
  const text = JSON.stringify(batch);
  expect(text.length).toBeLessThan(2048);
  const first = await post(httpUrl, text);
  expect(first.status).toBe(200);
  expect(JSON.parse(first.body)).toHaveLength(40);
  // Charged for its text alone, the burst would answer four more of these.
  const second = await post(httpUrl, text);
  expect(second.status).toBe(429);
});

it('with bytesPerSecondPerIp 0, POST bodies are not charged', async () => {
  const { gateway, httpUrl } = await res.gateway({
    limits: { maxMessageBytes: 4096, bytesPerSecondPerIp: 0, ratePerSecond: 0 },
  });
  gateway.method('echo', (params) => params);
  for (let i = 0; i < 5; i++) {
    const answer = await post(
      httpUrl,
      JSON.stringify({ jsonrpc: '2.0', id: i, method: 'echo', params: ['x'.repeat(3000)] }),
    );
    expect(answer.status).toBe(200);
  }
});

it('the burst holds two milliseconds of the rate: small bodies within it that come in one millisecond are all taken', () => {
  // The bucket refills by whole milliseconds: at the default 8 MiB/s, 16 KiB at once.
  const limits = resolveLimits({ maxMessageBytes: 200 });
  const bucket = postByteBuckets(limits)!.of('127.0.0.1');
  const cost = limits.messageCostBytes;
  for (let i = 0; i < 10; i++) {
    // Ten bodies in a tight loop (a millisecond or less): far below the rate, none refused.
    expect(bucket.available()).toBeGreaterThanOrEqual(cost);
    bucket.spend(cost);
  }
});

it('the burst holds two bodies of the least cost when maxMessageBytes is below messageCostBytes', async () => {
  // Almost no refill: what goes is the burst, 2 × max(maxMessageBytes, messageCostBytes) = 512.
  const { gateway, httpUrl } = await res.gateway({
    limits: {
      maxMessageBytes: 100,
      messageCostBytes: 256,
      bytesPerSecondPerIp: 1,
      ratePerSecond: 0,
    },
  });
  gateway.method('echo', (params) => params);
  const body = (n: number) =>
    JSON.stringify({ jsonrpc: '2.0', id: n, method: 'echo', params: [n] });
  expect((await post(httpUrl, body(1))).status).toBe(200);
  expect((await post(httpUrl, body(2))).status).toBe(200);
  // Each cost 256 however short: the third is past the burst.
  expect((await post(httpUrl, body(3))).status).toBe(429);
});

/**
 * The `method` label of rpc_calls_total and rpc_call_duration_seconds: the gateway's own methods
 * (rpc.authenticate, rpc.discover, ...) by their names, a fixed set; any other name that is not
 * registered, an `rpc.*` one a client made up included, as `(unknown)`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/index.js';
import { parseSamples, scrape } from '../support/metrics.js';
import { Resources } from '../support/resources.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('method labels of reserved names', () => {
  it('rpc.authenticate by its name; unregistered names, rpc.* among them, as (unknown) not_found', async () => {
    const { gateway, url, httpUrl } = await res.gateway({
      limits: { metricsCacheMs: 0, probeRequestsPerSecondPerIp: 0 },
      authenticate: ({ token }: { token?: string }) => ({ user: token }),
      userOf: (context: { user?: string }) => context.user,
      identity: { inBand: true },
    });
    gateway.method('sum', (params) => (params as number[]).reduce((a, b) => a + b, 0));
    const raw = await openRaw(res, url);
    expect((await raw.request('rpc.authenticate', { token: 'ann' })).result).toBeDefined();
    for (const method of ['nosuch', 'rpc.nosuch', 'rpc.made-up-2']) {
      expect((await raw.request(method, [])).error?.code).toBe(ErrorCode.MethodNotFound);
    }
    expect((await raw.request('sum', [1, 2])).result).toBe(3);

    const calls = parseSamples(await scrape(httpUrl))
      .filter((sample) => sample.name === 'rpc_calls_total')
      .map(({ labels, value }) => [labels['method'], labels['outcome'], value]);
    expect(calls.sort()).toEqual(
      [
        ['rpc.authenticate', 'ok', 1],
        ['(unknown)', 'not_found', 3],
        ['sum', 'ok', 1],
      ].sort(),
    );
  });
});

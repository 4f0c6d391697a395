/**
 * Issue 14, finding 7 (part): a cookie sent twice resolves to its first value; refusals a
 * client can cause at will cannot flood the log; session ids cannot be guessed from one another.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { UpgradeRejection } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { attemptUpgrade, openRaw, openSocket } from '../support/sockets.js';
import { CaptureLogger } from '../support/logging.js';
import { sampleValue, scrape } from '../support/metrics.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('Cookie header with a name sent twice', () => {
  it('authenticate sees the first value, on an upgrade and on a POST (as browsers and the cookie package read it)', async () => {
    const seen: (string | undefined)[] = [];
    const { url, httpUrl, gateway } = await res.gateway<string>({
      authenticate: ({ cookies }) => {
        seen.push(cookies['token']);
        if (cookies['token'] !== 'site') throw new UpgradeRejection(401);
        return 'user';
      },
    });
    gateway.method('echo', (params) => params);
    // The site's cookie first; one tossed in from a sibling subdomain after it.
    const cookie = 'token=site; other=1; token=tossed';
    await openSocket(res, url, undefined, { headers: { cookie } });
    const response = await fetch(`${httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'echo', params: [1], id: 1 }),
    });
    expect(response.status).toBe(200);
    expect(seen).toEqual(['site', 'site']);
  });
});

describe('refusals a client can cause at will', () => {
  it('are logged at info once per interval, the rest at debug, then one line with their count; every one is counted in the metrics', async () => {
    const logger = new CaptureLogger();
    const { url, httpUrl, gateway } = await res.gateway({
      logger,
      limits: { maxConnectionsPerIp: 1 },
    });
    await openRaw(res, url);
    const REFUSED = 30;
    for (let i = 0; i < REFUSED; i++) expect(await attemptUpgrade(res, url)).toBe(429);

    const rejected = logger.withMessage('upgrade rejected');
    expect(rejected.filter((r) => r.level === 'info')).toHaveLength(1);
    expect(rejected.filter((r) => r.level === 'debug')).toHaveLength(REFUSED - 1);
    expect(
      sampleValue(await scrape(httpUrl), 'rpc_rejected_upgrades_total', { reason: 'ip-limit' }),
    ).toBe(REFUSED);

    // The interval's count is written when it ends, or when the gateway closes.
    await gateway.close({ timeoutMs: 1_000 });
    const summary = logger.withMessage('more connections refused (logged at debug)');
    expect(summary.map((r) => [r.level, r.obj])).toEqual([
      ['info', { refused: { 'ip-limit': REFUSED - 1 }, total: REFUSED - 1, intervalMs: 10_000 }],
    ]);
  });
});

describe('session ids', () => {
  it('are the node id, then 22 random letters and digits: distinct, in no order, and a guessed neighbour reaches nobody', async () => {
    const { url, httpUrl, gateway } = await res.gateway();
    gateway.method('whoami', (_params, ctx) => ctx.session.id);
    for (let i = 0; i < 10; i++) await openRaw(res, url);
    const ids = [...gateway.sessions.keys()];
    const response = await fetch(`${httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'whoami', id: 1 }),
    });
    ids.push(((await response.json()) as { result: string }).result);

    const shape = new RegExp(`^${gateway.nodeId.replace(/[-_]/g, '\\$&')}-[0-9A-Za-z]{22}$`);
    for (const id of ids) expect(id).toMatch(shape);
    expect(new Set(ids).size).toBe(ids.length);
    // The node is still read back from the id (the part before the last '-').
    for (const id of ids) expect(id.slice(0, id.lastIndexOf('-'))).toBe(gateway.nodeId);
    // Counting does not find a session.
    for (let n = 1; n <= 50; n++) {
      expect(await gateway.notifySession(`${gateway.nodeId}-${n.toString(36)}`, 'hello')).toBe(
        false,
      );
    }
  });
});

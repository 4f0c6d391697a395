import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';
import { openRaw } from '../support/sockets.js';
import { parseSamples, sampleValue, scrape } from '../support/metrics.js';
import { silentLogger as silent } from '../../src/peer/logger.js';

const res = new Resources();
afterEach(() => res.cleanup());
const ws = { transport: 'websocket' };

describe('GET /metrics', () => {
  it('is Prometheus text with connection and message counts', async () => {
    // Each scrape renders: the counts read before and after are the moment's.
    const { url, httpUrl, gateway } = await res.demoGateway({ limits: { metricsCacheMs: 0 } });
    const empty = await fetch(`${httpUrl}/metrics`);
    expect(empty.status).toBe(200);
    expect(empty.headers.get('content-type')).toContain('text/plain');
    const before = await empty.text();
    expect(before).toContain('# TYPE rpc_connections gauge');
    expect(before).toContain('# TYPE rpc_calls_total counter');
    expect(before).toContain('# TYPE rpc_call_duration_seconds histogram');
    expect(sampleValue(before, 'rpc_connections', ws)).toBe(0);
    expect(sampleValue(before, 'rpc_messages_received_total', ws)).toBe(0);
    expect(sampleValue(before, 'rpc_messages_sent_total', ws)).toBe(0);
    // Every line parses as a sample or a comment.
    expect(parseSamples(before).length).toBeGreaterThan(0);

    const a = await openRaw(res, url);
    const b = await openRaw(res, url);
    for (const n of [1, 2, 3]) await a.request('sum', [n]);
    b.send({ jsonrpc: '2.0', method: 'update', params: [1] }); // a notification: no reply
    await b.request('sum', [4]);
    const [session] = [...gateway.sessions.values()];
    session!.notify('hello', [1]);
    await a.until(() => a.frames.length + b.frames.length === 5, 'the notification');

    const text = await scrape(httpUrl);
    expect(sampleValue(text, 'rpc_connections', ws)).toBe(2);
    expect(sampleValue(text, 'rpc_messages_received_total', ws)).toBe(5);
    expect(sampleValue(text, 'rpc_messages_sent_total', ws)).toBe(5);

    await a.close();
    await waitUntil(() => gateway.sessions.size === 1, 'one session to end');
    expect(sampleValue(await scrape(httpUrl), 'rpc_connections', ws)).toBe(1);
  });

  it('counts calls by method and outcome, with a latency histogram per method', async () => {
    const { url, httpUrl, gateway } = await res.demoGateway({
      authorize: ({ method }) => method !== 'admin.wipe',
    });
    gateway.method('boom', () => {
      throw new Error('kaput');
    });
    gateway.method('later', async () => {
      await new Promise((resolve) => setImmediate(resolve));
      return 'done';
    });
    gateway.method('admin.wipe', () => 'wiped');
    const raw = await openRaw(res, url);
    const N = 7;
    for (let i = 0; i < N; i++) expect((await raw.request('sum', [i, 1])).result).toBe(i + 1);
    expect((await raw.request('later')).result).toBe('done');
    expect((await raw.request('boom')).error?.code).toBe(ErrorCode.InternalError);
    expect((await raw.request('admin.wipe')).error?.code).toBe(ErrorCode.Unauthorized);
    expect((await raw.request('sum', 'not params')).error?.code).toBe(ErrorCode.InvalidRequest);

    const text = await scrape(httpUrl);
    const calls = (method: string, outcome: string) =>
      sampleValue(text, 'rpc_calls_total', { method, outcome });
    expect(calls('sum', 'ok')).toBe(N);
    expect(calls('sum', 'error')).toBeUndefined();
    expect(calls('later', 'ok')).toBe(1);
    expect(calls('boom', 'error')).toBe(1);
    expect(calls('admin.wipe', 'rejected')).toBe(1);

    const histogram = (suffix: string, labels: Record<string, string>) =>
      sampleValue(text, `rpc_call_duration_seconds${suffix}`, labels);
    expect(histogram('_count', { method: 'sum' })).toBe(N);
    expect(histogram('_bucket', { method: 'sum', le: '+Inf' })).toBe(N);
    expect(histogram('_sum', { method: 'sum' })).toBeGreaterThanOrEqual(0);
    expect(histogram('_count', { method: 'later' })).toBe(1);
    expect(histogram('_count', { method: 'boom' })).toBe(1);
    // Refused before running: counted, but no latency.
    expect(histogram('_count', { method: 'admin.wipe' })).toBeUndefined();
    // Buckets are cumulative: non-decreasing, ending at the count.
    const buckets = parseSamples(text)
      .filter((s) => s.name === 'rpc_call_duration_seconds_bucket' && s.labels.method === 'sum')
      .map((s) => s.value);
    expect(buckets.length).toBe(15);
    expect([...buckets].sort((x, y) => x - y)).toEqual(buckets);
    expect(buckets.at(-1)).toBe(N);
  });

  it('counts calls to unregistered methods as (unknown), never under the name sent', async () => {
    const { url, httpUrl } = await res.demoGateway();
    const raw = await openRaw(res, url);
    const names = ['drop_tables_xyzzy', 'a"b\\c\nd', 'rpc.nothing_here_xyzzy'];
    for (const method of names) {
      expect((await raw.request(method)).error?.code).toBe(ErrorCode.MethodNotFound);
    }
    const text = await scrape(httpUrl);
    // An rpc.* name that is not one of the gateway's own is unknown as any other.
    expect(
      sampleValue(text, 'rpc_calls_total', { method: '(unknown)', outcome: 'not_found' }),
    ).toBe(3);
    expect(text).not.toContain('xyzzy');
    expect(text).not.toContain('a\\"b');
    expect(sampleValue(text, 'rpc_call_duration_seconds_count', { method: '(unknown)' })).toBe(
      undefined,
    );
  });

  it('counts every call the authorize hook settles: refused as rejected, a hook that throws or rejects as error', async () => {
    const { url, httpUrl, gateway } = await res.gateway({
      authorize: ({ method }) => {
        if (method === 'denied') return false;
        if (method === 'throws') throw new Error('hook bug');
        if (method === 'rejects') return Promise.reject(new Error('hook bug'));
        return true;
      },
      logger: silent,
    });
    for (const method of ['denied', 'throws', 'rejects', 'fine']) gateway.method(method, () => 1);
    const raw = await openRaw(res, url);
    expect((await raw.request('denied')).error?.code).toBe(ErrorCode.Unauthorized);
    for (const method of ['throws', 'rejects']) {
      expect((await raw.request(method)).error?.code).toBe(ErrorCode.InternalError);
    }
    expect((await raw.request('fine')).result).toBe(1);
    const text = await scrape(httpUrl);
    const count = (method: string, outcome: string) =>
      sampleValue(text, 'rpc_calls_total', { method, outcome });
    expect(count('denied', 'rejected')).toBe(1);
    expect(count('throws', 'error')).toBe(1);
    expect(count('rejects', 'error')).toBe(1);
    expect(count('fine', 'ok')).toBe(1);
  });

  it('reports subscriptions by topic, dropped messages and slow-consumer disconnects', async () => {
    const { url, httpUrl, gateway } = await res.gateway({ limits: { metricsCacheMs: 0 } });
    gateway.topic('news');
    // A high-water mark of 0 makes every message "too much": deterministic drops and disconnects.
    gateway.topic('lossy', { slowConsumer: 'drop', highWaterMark: 0 });
    gateway.topic('fragile', { slowConsumer: 'disconnect', highWaterMark: 0 });

    const a = await openRaw(res, url);
    const b = await openRaw(res, url);
    const aNews = (await a.request('subscribe', ['news'])).result;
    await b.request('subscribe', ['news']);
    await b.request('subscribe', ['lossy']);
    let text = await scrape(httpUrl);
    expect(sampleValue(text, 'rpc_subscriptions', { topic: 'news' })).toBe(2);
    expect(sampleValue(text, 'rpc_subscriptions', { topic: 'lossy' })).toBe(1);
    expect(sampleValue(text, 'rpc_dropped_messages_total')).toBe(0);
    expect(sampleValue(text, 'rpc_slow_consumer_disconnects_total')).toBe(0);

    for (const i of [1, 2, 3]) await gateway.publish('lossy', { i });
    await waitUntil(() => gateway.pubsub.stats.dropped === 3, 'three drops');
    expect((await a.request('unsubscribe', [aNews])).result).toBe(true);

    const c = await openRaw(res, url);
    await c.request('subscribe', ['fragile']);
    await gateway.publish('fragile', { i: 1 });
    expect((await c.closed).code).toBe(1013);

    text = await scrape(httpUrl);
    expect(sampleValue(text, 'rpc_subscriptions', { topic: 'news' })).toBe(1);
    expect(sampleValue(text, 'rpc_dropped_messages_total')).toBe(3);
    expect(sampleValue(text, 'rpc_slow_consumer_disconnects_total')).toBe(1);
    // The dropped messages never reached b.
    await b.barrier();
    expect(b.notifications()).toEqual([]);
  });

  it('metrics: false serves 404', async () => {
    const { httpUrl } = await res.demoGateway({ metrics: false });
    const response = await fetch(`${httpUrl}/metrics`);
    expect(response.status).toBe(404);
    expect(await response.text()).not.toContain('rpc_');
  });
});

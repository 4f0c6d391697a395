import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, httpGet } from '../support/network.js';
import { openRawSocket } from '../support/gateway.js';
import { startPythonUpstream } from '../support/python-upstream.js';
import type { PythonUpstream } from '../support/python-upstream.js';
import { waitFor } from '../support/waiting.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

interface Reply {
  id: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: { upstream: string; reason: string } };
}

interface Stats {
  inFlight: number;
  maxInFlight: number;
  attempts: Record<string, number>;
  calls: Record<string, number>;
  cancelled: string[];
}

let python: PythonUpstream;
let running: RoutedGateway;
let closedPort: number;

beforeAll(async () => {
  python = await startPythonUpstream();
  closedPort = await freePort();
  const url = python.url;
  running = await startRoutedGateway(
    {
      upstreams: {
        orders: { url },
        quick: { url, timeoutMs: 300 },
        // One session takes the whole bound here: its share is the upstream's.
        narrow: { url, maxConcurrent: 3, maxConcurrentPerSession: 3 },
        retrying: { url, retries: 2, timeoutMs: 200 },
        // A timeout that never fires within the test: an answer cannot be a wait for it.
        gone: { url: `http://127.0.0.1:${closedPort}/rpc`, retries: 2, timeoutMs: 2 ** 31 - 1 },
      },
      methods: {
        'orders.*': 'orders',
        'quick.*': 'quick',
        'narrow.*': 'narrow',
        'idem.*': { upstream: 'retrying', idempotent: true },
        'plain.*': 'retrying',
        'gone.*': 'gone',
      },
    },
    { limits: { maxMessageBytes: 64 * 1024 } },
  );
});

afterAll(async () => {
  await running?.close();
  await python?.stop();
});

const stats = () => python.rpc('test.stats') as Promise<Stats>;

async function call(method: string, params?: unknown): Promise<Reply> {
  const raw = await openRawSocket(`${running.url}?user=alice`);
  try {
    raw.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }));
    return JSON.parse((await raw.waitFor(1))[0]!) as Reply;
  } finally {
    raw.close();
  }
}

function expectUpstreamError(reply: Reply, code: number, upstream: string): void {
  expect(reply.error?.code).toBe(code);
  expect(reply.error?.data?.upstream).toBe(upstream);
  expect(reply.error?.data?.reason).toMatch(/\S/);
  // Never the upstream's address unless exposeErrorDetails.
  expect(JSON.stringify(reply.error)).not.toContain('127.0.0.1');
}

describe('an upstream that misbehaves', () => {
  it("the client's rpc.cancel aborts the upstream request", async () => {
    await python.rpc('test.reset');
    const raw = await openRawSocket(`${running.url}?user=alice`);
    raw.socket.send(
      JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'orders.slow', params: { ms: 10_000 } }),
    );
    await waitFor(async () => (await stats()).inFlight === 1, 'the call in Python');
    raw.socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id: 9 } }));
    const reply = JSON.parse((await raw.waitFor(1))[0]!) as Reply;
    expect(reply.error?.code).toBe(-32001);
    await waitFor(async () => (await stats()).cancelled.length === 1, 'Python to see the abort');
    raw.close();
  });

  it("the client's disconnect aborts the upstream request", async () => {
    await python.rpc('test.reset');
    const raw = await openRawSocket(`${running.url}?user=alice`);
    raw.socket.send(
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'orders.slow', params: { ms: 10_000 } }),
    );
    await waitFor(async () => (await stats()).inFlight === 1, 'the call in Python');
    raw.socket.terminate();
    await waitFor(async () => (await stats()).cancelled.length === 1, 'Python to see the abort');
  });

  it('the route timeout answers -32012 and aborts the HTTP request', async () => {
    await python.rpc('test.reset');
    // quick.hang is never answered: the reply can only come from a timer, and its reason names
    // the route's 300 ms (the upstream default is 10 000 ms).
    const reply = await call('quick.hang');
    expectUpstreamError(reply, -32012, 'quick');
    expect(reply.error?.data?.reason).toBe('no answer within 300 ms');
    await waitFor(async () => (await stats()).cancelled.length === 1, 'Python to see the abort');
  });

  it.each([
    ['a body that is not JSON', 'orders.garbage', {}],
    ['a close mid-response', 'orders.close', {}],
    ['a non-2xx status without a JSON-RPC body', 'orders.status', { status: 502 }],
    ['a reply larger than maxMessageBytes', 'orders.big', { bytes: 100_000 }],
  ])('%s answers -32011', async (_what, method, params) => {
    expectUpstreamError(await call(method, params), -32011, 'orders');
  });

  it('a refused connection answers -32011 at once, after its safe retries', async () => {
    // "At once": gone's timeout never fires within the test, so the answer cannot be a wait for
    // it (or for a refused attempt to be let go of, bounded by the same timeout); the retries are
    // counted as the connections undici saw refused.
    const refused: unknown[] = [];
    const onConnectError = (message: unknown): void => {
      const { connectParams } = message as { connectParams: { port: unknown } };
      if (Number(connectParams.port) === closedPort) refused.push(message);
    };
    subscribe('undici:client:connectError', onConnectError);
    try {
      const reply = await call('gone.get');
      expectUpstreamError(reply, -32011, 'gone');
      expect(reply.error?.data?.reason).toBe('connection refused');
      expect(refused).toHaveLength(3); // the call and its 2 retries
    } finally {
      unsubscribe('undici:client:connectError', onConnectError);
    }
  });

  it('never holds more than maxConcurrent requests; the rest get -32013 at once', async () => {
    await python.rpc('test.reset');
    const raw = await openRawSocket(`${running.url}?user=alice`);
    for (let id = 1; id <= 10; id++) {
      raw.socket.send(
        JSON.stringify({ jsonrpc: '2.0', id, method: 'narrow.slow', params: { ms: 500 } }),
      );
    }
    // "At once": the first seven answers are the refusals, ahead of every held call's result.
    const busy = (await raw.waitFor(7)).map((f) => JSON.parse(f) as Reply);
    for (const reply of busy) expectUpstreamError(reply, -32013, 'narrow');
    const all = (await raw.waitFor(10)).map((f) => JSON.parse(f) as Reply);
    raw.close();
    expect(all.filter((r) => r.result !== undefined)).toHaveLength(3);
    expect((await stats()).maxInFlight).toBe(3);
  });

  it('retries an idempotent route on timeout with the same request id, never a plain one', async () => {
    await python.rpc('test.reset');
    expectUpstreamError(await call('idem.hang'), -32012, 'retrying');
    let attempts = Object.values((await stats()).attempts);
    expect(attempts).toEqual([3]);

    await python.rpc('test.reset');
    expectUpstreamError(await call('plain.hang'), -32012, 'retrying');
    expectUpstreamError(await call('plain.garbage'), -32011, 'retrying');
    attempts = Object.values((await stats()).attempts);
    expect(attempts).toEqual([1, 1]);

    await python.rpc('test.reset');
    expect((await call('idem.fail', { code: 5, message: 'no' })).error).toEqual({
      code: 5,
      message: 'no',
    });
    attempts = Object.values((await stats()).attempts);
    expect(attempts).toEqual([1]);
  });

  it('counts requests by upstream and outcome in the metrics', async () => {
    await call('orders.get');
    const { body } = await httpGet(`${running.httpUrl}/metrics`);
    expect(body).toMatch(/wsrpc_upstream_requests_total\{upstream="orders",outcome="ok"\} [1-9]/);
    expect(body).toMatch(
      /wsrpc_upstream_requests_total\{upstream="orders",outcome="unavailable"\} [1-9]/,
    );
    expect(body).toMatch(/wsrpc_upstream_requests_total\{upstream="quick",outcome="timeout"\} 1/);
    expect(body).toMatch(/wsrpc_upstream_requests_total\{upstream="narrow",outcome="busy"\} 7/);
    expect(body).toMatch(/wsrpc_upstream_requests_total\{upstream="retrying",outcome="error"\} 1/);
    expect(body).toMatch(
      /wsrpc_upstream_request_duration_seconds_count\{upstream="orders"\} [1-9]/,
    );
    expect(body).toMatch(/wsrpc_upstream_in_flight\{upstream="narrow"\} 0/);
  });
});

describe('an upstream killed mid-call', () => {
  it('answers -32011 and nothing hangs; later calls are refused at once', async () => {
    const doomed = await startPythonUpstream();
    const gateway = await startRoutedGateway({
      upstreams: { doomed: { url: doomed.url } },
      methods: { 'doomed.*': 'doomed' },
    });
    try {
      const raw = await openRawSocket(`${gateway.url}?user=alice`);
      raw.socket.send(
        JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'doomed.slow', params: { ms: 30_000 } }),
      );
      await waitFor(
        async () => ((await doomed.rpc('test.stats')) as Stats).inFlight === 1,
        'the call in Python',
      );
      await doomed.stop();
      const reply = JSON.parse((await raw.waitFor(1))[0]!) as Reply;
      expect(reply.error?.code).toBe(-32011);
      raw.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'doomed.get' }));
      const next = JSON.parse((await raw.waitFor(2))[1]!) as Reply;
      expect(next.error?.code).toBe(-32011);
      raw.close();
    } finally {
      await gateway.close();
      await doomed.stop();
    }
  });
});

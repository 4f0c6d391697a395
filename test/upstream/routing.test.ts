import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRawSocket } from '../support/gateway.js';
import { httpGet } from '../support/network.js';
import { startPythonUpstream } from '../support/python-upstream.js';
import type { PythonUpstream } from '../support/python-upstream.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

interface Echo {
  params: unknown;
  path: string;
  headers: {
    requestId: string | null;
    session: string | null;
    user: string | null;
    context: unknown;
    traceparent: string | null;
    deadline: string | null;
  };
}

let python: PythonUpstream;
let running: RoutedGateway;

beforeAll(async () => {
  python = await startPythonUpstream();
  const base = `http://127.0.0.1:${python.port}`;
  running = await startRoutedGateway({
    upstreams: {
      orders: { url: `${base}/rpc`, timeoutMs: 5000 },
      eu: { url: `${base}/eu` },
      special: { url: `${base}/special` },
      billing: { url: `${base}/billing` },
    },
    methods: {
      'orders.*': 'orders',
      'orders.eu.*': 'eu',
      'orders.special.get': { upstream: 'special', timeoutMs: 2000 },
      'billing.*': 'billing',
    },
  });
  running.gateway.method('orders.local', () => 'served by the gateway');
  running.gateway.method('echo', (params) => params);
});

afterAll(async () => {
  await running?.close();
  await python?.stop();
});

async function exchange(message: unknown, user = 'alice'): Promise<unknown> {
  const raw = await openRawSocket(`${running.url}?user=${encodeURIComponent(user)}`);
  try {
    raw.socket.send(JSON.stringify(message));
    const [frame] = await raw.waitFor(1);
    return JSON.parse(frame!);
  } finally {
    raw.close();
  }
}

describe('calls routed to an upstream over HTTP', () => {
  it('reach it with the client id restored, the params and the identity headers', async () => {
    const before = Date.now();
    const sessions = new Set(running.gateway.sessions.keys());
    const raw = await openRawSocket(`${running.url}?user=${encodeURIComponent('alice ü')}`);
    const session = [...running.gateway.sessions.values()].find((s) => !sessions.has(s.id))!;
    raw.socket.send(
      JSON.stringify({ jsonrpc: '2.0', id: 'client-7', method: 'orders.get', params: { id: 42 } }),
    );
    const reply = JSON.parse((await raw.waitFor(1))[0]!) as { id: unknown; result: Echo };
    raw.close();
    expect(reply.id).toBe('client-7');
    expect(reply.result.params).toEqual({ id: 42 });
    expect(reply.result.path).toBe('/rpc');
    const headers = reply.result.headers;
    expect(headers.session).toBe(session.id);
    expect(headers.user).toBe('alice ü');
    expect(headers.context).toEqual({ user: 'alice ü', roles: ['buyer'] });
    expect(headers.requestId).toMatch(/^[\w-]{10,}$/);
    expect(headers.traceparent).toBeNull();
    expect(Number(headers.deadline)).toBeGreaterThanOrEqual(before + 5000);
    expect(Number(headers.deadline)).toBeLessThanOrEqual(Date.now() + 5000);
  });

  it("pass the client's traceparent on (no tracer: unchanged)", async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const reply = (await exchange({
      jsonrpc: '2.0',
      id: 1,
      method: 'orders.get',
      traceparent,
    })) as { result: Echo };
    expect(reply.result.headers.traceparent).toBe(traceparent);
  });

  it('give each call its own request id', async () => {
    const ids = await Promise.all(
      [1, 2, 3].map(async (n) => {
        const reply = (await exchange({ jsonrpc: '2.0', id: n, method: 'orders.get' })) as {
          result: Echo;
        };
        return reply.result.headers.requestId;
      }),
    );
    expect(new Set(ids).size).toBe(3);
  });

  it('go to the exact route first, then the longest prefix; local methods and unknown names stay local', async () => {
    const pathOf = async (method: string) =>
      ((await exchange({ jsonrpc: '2.0', id: 1, method })) as { result: Echo }).result.path;
    expect(await pathOf('orders.get')).toBe('/rpc');
    expect(await pathOf('orders.special.get')).toBe('/special');
    expect(await pathOf('orders.eu.get')).toBe('/eu');
    expect(await exchange({ jsonrpc: '2.0', id: 1, method: 'orders.local' })).toEqual({
      jsonrpc: '2.0',
      id: 1,
      result: 'served by the gateway',
    });
    expect(await exchange({ jsonrpc: '2.0', id: 1, method: 'inventory.get' })).toMatchObject({
      error: { code: -32601 },
    });
    expect(await exchange({ jsonrpc: '2.0', id: 1, method: 'rpc.orders' })).toMatchObject({
      error: { code: -32601 },
    });
  });

  it("pass the upstream's JSON-RPC error to the client unchanged", async () => {
    const error = { code: 4242, message: 'no such order', data: { id: 7, hint: ['a', 1] } };
    expect(await exchange({ jsonrpc: '2.0', id: 3, method: 'orders.fail', params: error })).toEqual(
      { jsonrpc: '2.0', id: 3, error },
    );
    const inRange = { code: -32602, message: 'bad id', data: null };
    expect(
      await exchange({ jsonrpc: '2.0', id: 4, method: 'orders.fail', params: inRange }),
    ).toEqual({ jsonrpc: '2.0', id: 4, error: { code: -32602, message: 'bad id' } });
  });

  it('send notifications on without an id', async () => {
    await python.rpc('test.reset');
    const raw = await openRawSocket(`${running.url}?user=bob`);
    raw.socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'orders.get', params: { n: 1 } }));
    raw.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'echo', params: [1] }));
    await raw.waitFor(1);
    let calls: Record<string, number> = {};
    for (let i = 0; i < 100 && !calls['orders.get']; i++) {
      calls = ((await python.rpc('test.stats')) as { calls: Record<string, number> }).calls;
      await new Promise((r) => setTimeout(r, 20));
    }
    raw.close();
    expect(calls['orders.get']).toBe(1);
    expect(raw.frames).toHaveLength(1);
  });

  it('answer a batch across two upstreams and a local method as one batch, in order', async () => {
    const batch = [
      { jsonrpc: '2.0', id: 1, method: 'orders.slow', params: { ms: 200 } },
      { jsonrpc: '2.0', id: 2, method: 'billing.get', params: { invoice: 9 } },
      { jsonrpc: '2.0', method: 'orders.get' },
      { jsonrpc: '2.0', id: 3, method: 'echo', params: { local: true } },
      { jsonrpc: '2.0', id: 4, method: 'billing.fail', params: { code: 12, message: 'declined' } },
    ];
    const replies = (await exchange(batch)) as { id: number; result?: unknown; error?: unknown }[];
    expect(Array.isArray(replies)).toBe(true);
    expect(replies.map((r) => r.id)).toEqual([1, 2, 3, 4]);
    expect(replies[0]!.result).toEqual({ slept: 200 });
    expect((replies[1]!.result as Echo).path).toBe('/billing');
    expect((replies[1]!.result as Echo).params).toEqual({ invoice: 9 });
    expect(replies[2]!.result).toEqual({ local: true });
    expect(replies[3]!.error).toEqual({ code: 12, message: 'declined' });
  });

  it('over HTTP POST too, with the session id of the exchange', async () => {
    const response = await fetch(`${running.httpUrl}/rpc?user=carol`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'orders.get', params: [1, 2] }),
    });
    const reply = (await response.json()) as { result: Echo };
    expect(reply.result.params).toEqual([1, 2]);
    expect(reply.result.headers.user).toBe('carol');
    expect(reply.result.headers.session).toMatch(/\S/);
  });

  it('leave out a context too large for a header, and an anonymous session has no user', async () => {
    const big = 'u'.repeat(7000);
    const reply = (await exchange({ jsonrpc: '2.0', id: 1, method: 'orders.get' }, big)) as {
      result: Echo;
    };
    expect(reply.result.headers.context).toBeNull();
    expect(reply.result.headers.user).toBe(big);
    const raw = await openRawSocket(running.url);
    raw.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'orders.get' }));
    const anonymous = JSON.parse((await raw.waitFor(1))[0]!) as { result: Echo };
    raw.close();
    expect(anonymous.result.headers.user).toBeNull();
    expect(anonymous.result.headers.context).toBeNull();
    expect(anonymous.result.headers.session).toMatch(/\S/);
  });

  it('label calls by route in the metrics: the pattern, not each name a client sends', async () => {
    for (const method of ['orders.get', 'orders.x1', 'orders.x2'])
      await exchange({ jsonrpc: '2.0', id: 1, method, params: {} });
    const { body } = await httpGet(`${running.httpUrl}/metrics`);
    expect(body).toMatch(/rpc_calls_total\{method="orders\.\*",outcome="ok"\} [1-9]/);
    expect(body).not.toContain('orders.x1');
  });
});

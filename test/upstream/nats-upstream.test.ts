import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { nanoid } from 'nanoid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRawSocket } from '../support/gateway.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

import { NATS_URL } from '../support/brokers.js';
const subject = `test.upstream.${nanoid(8)}`;
let responder: NatsConnection;
let running: RoutedGateway;
const seen: { method: string; headers: Record<string, string> }[] = [];

beforeAll(async () => {
  responder = await connect({ servers: NATS_URL });
  const subscription = responder.subscribe(subject, { queue: 'orders' });
  void (async () => {
    for await (const msg of subscription) {
      const request = msg.json<{ id?: number; method: string; params?: unknown }>();
      const headers: Record<string, string> = {};
      for (const key of msg.headers?.keys() ?? [])
        headers[key.toLowerCase()] = msg.headers!.get(key);
      seen.push({ method: request.method, headers });
      if (request.method === 'orders.hang' || request.id === undefined) continue;
      const reply =
        request.method === 'orders.fail'
          ? {
              jsonrpc: '2.0',
              id: request.id,
              error: { code: 77, message: 'out of stock', data: [1] },
            }
          : request.method === 'orders.garbage'
            ? 'not json'
            : { jsonrpc: '2.0', id: request.id, result: { params: request.params, headers } };
      msg.respond(typeof reply === 'string' ? reply : JSON.stringify(reply));
    }
  })();
  running = await startRoutedGateway({
    upstreams: {
      orders: { nats: { url: NATS_URL, subject }, timeoutMs: 300, maxConcurrent: 8 },
      nobody: { nats: { url: [NATS_URL], subject: `${subject}.nobody` } },
    },
    methods: { 'orders.*': 'orders', 'nobody.*': 'nobody' },
  });
  await running.routes.ready;
});

afterAll(async () => {
  await running?.close();
  await responder?.close();
});

async function call(message: Record<string, unknown>): Promise<{
  id: unknown;
  result?: { params: unknown; headers: Record<string, string> };
  error?: { code: number; message: string; data?: unknown };
}> {
  const raw = await openRawSocket(`${running.url}?user=dora`);
  try {
    raw.socket.send(JSON.stringify({ jsonrpc: '2.0', ...message }));
    return JSON.parse((await raw.waitFor(1))[0]!) as never;
  } finally {
    raw.close();
  }
}

describe('a NATS request-reply upstream', () => {
  it('gets the request as the payload and the identity as NATS headers', async () => {
    const before = Date.now();
    const reply = await call({ id: 'c1', method: 'orders.get', params: { sku: 'A-1' } });
    const after = Date.now();
    expect(reply.id).toBe('c1');
    expect(reply.result!.params).toEqual({ sku: 'A-1' });
    const headers = reply.result!.headers;
    expect(headers['x-wsrpc-user']).toBe('dora');
    expect(headers['x-wsrpc-session']).toMatch(/\S/);
    expect(JSON.parse(Buffer.from(headers['x-wsrpc-context']!, 'base64url').toString())).toEqual({
      user: 'dora',
      roles: ['buyer'],
    });
    expect(headers['x-request-id']).toMatch(/\S/);
    // The send time plus the route's 300 ms: between the two clock readings around the call.
    expect(Number(headers['x-wsrpc-deadline'])).toBeGreaterThanOrEqual(before + 300);
    expect(Number(headers['x-wsrpc-deadline'])).toBeLessThanOrEqual(after + 300);
  });

  it("gets the request's traceparent and tracestate members as NATS headers", async () => {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const reply = await call({
      id: 'c-trace',
      method: 'orders.get',
      traceparent,
      tracestate: ' congo=t61rcWkgMzE , rojo=00f067aa0ba902b7',
    });
    expect(reply.result!.headers).toMatchObject({
      traceparent,
      tracestate: 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7',
    });
  });

  it("passes the responder's JSON-RPC error unchanged", async () => {
    const reply = await call({ id: 2, method: 'orders.fail' });
    expect(reply.error).toEqual({ code: 77, message: 'out of stock', data: [1] });
  });

  it('answers -32012 when no reply comes within the timeout, -32011 for garbage or no responders', async () => {
    // orders.hang is never answered: the reply can only come from a timer, and its reason names
    // the route's 300 ms (the upstream default is 10 000 ms).
    const late = await call({ id: 3, method: 'orders.hang' });
    expect(late.error).toMatchObject({
      code: -32012,
      data: { upstream: 'orders', reason: 'no answer within 300 ms' },
    });
    const garbage = await call({ id: 4, method: 'orders.garbage' });
    expect(garbage.error).toMatchObject({ code: -32011, data: { upstream: 'orders' } });
    const nobody = await call({ id: 5, method: 'nobody.get' });
    expect(nobody.error).toMatchObject({
      code: -32011,
      data: { upstream: 'nobody', reason: 'no responders' },
    });
  });

  it('publishes a notification without a reply subject', async () => {
    const before = seen.length;
    const raw = await openRawSocket(`${running.url}?user=dora`);
    raw.socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'orders.note', params: [1] }));
    for (let i = 0; i < 100 && seen.length === before; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    raw.close();
    expect(seen.slice(before).map((s) => s.method)).toEqual(['orders.note']);
  });
});

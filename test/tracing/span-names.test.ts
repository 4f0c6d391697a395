// Span names and attributes of routed calls: a client chooses the method name, so a span is named
// after the route it matched (few names, as OpenTelemetry's RPC conventions want) and carries the
// name itself cut to a bound.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { loadTracing } from '../../src/tracing/index.js';
import { installUpstreamRoutes, resolveUpstreamsConfig } from '../../src/upstream/index.js';
import { MAX_SHOWN_METHOD_CHARS } from '../../src/upstream/install-routes.js';
import { Resources } from '../support/resources.js';
import { installRecordingTracer } from './in-memory-tracer.js';

const res = new Resources();
let recorder: ReturnType<typeof installRecordingTracer>;
let upstream: Server;

beforeEach(() => {
  recorder = installRecordingTracer();
});
afterEach(async () => {
  await res.cleanup();
  await new Promise((resolve) => upstream.close(resolve));
  recorder.uninstall();
});

/** A gateway routing `orders.*` and `stock.get` to an upstream that answers every call. */
async function routedGateway(): Promise<string> {
  upstream = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"jsonrpc":"2.0","id":1,"result":"ok"}');
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/`;
  const tracing = await loadTracing({ enabled: true, serviceName: 'edge-gateway' });
  const running = await res.gateway();
  const routes = installUpstreamRoutes(
    running.gateway,
    resolveUpstreamsConfig({
      upstreams: { orders: { url } },
      methods: { 'orders.*': 'orders', 'stock.get': 'orders' },
    }),
    { logger: silentLogger, tracing },
  );
  res.gateways.push(routes);
  return running.url;
}

describe('span names of routed calls', () => {
  it('a long method name: the span is named after its route, rpc.method is cut', async () => {
    const url = await routedGateway();
    const raw = await res.raw(url);
    const method = 'orders.' + 'A'.repeat(100_000);
    raw.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method }));
    const [reply] = await raw.waitFor(1);
    expect(JSON.parse(reply!)).toEqual({ jsonrpc: '2.0', id: 1, result: 'ok' });

    expect(recorder.spans.map((s) => s.name).sort()).toEqual([
      'rpc.call orders.*',
      'upstream.request orders',
    ]);
    for (const span of recorder.spans) {
      expect(span.attributes['rpc.method']).toBe(method.slice(0, MAX_SHOWN_METHOD_CHARS));
      expect(span.attributes['wsrpc.upstream']).toBe('orders');
    }
  });

  it('names under one prefix share a span name; an exact route names its own', async () => {
    const url = await routedGateway();
    const raw = await res.raw(url);
    const methods = ['orders.get', 'orders.list', 'orders.x1', 'stock.get'];
    methods.forEach((method, i) =>
      raw.socket.send(JSON.stringify({ jsonrpc: '2.0', id: i + 1, method })),
    );
    await raw.waitFor(methods.length);
    const calls = recorder.spans.filter((s) => s.name.startsWith('rpc.call '));
    expect(calls.map((s) => s.name).sort()).toEqual([
      'rpc.call orders.*',
      'rpc.call orders.*',
      'rpc.call orders.*',
      'rpc.call stock.get',
    ]);
    // A short name goes into rpc.method whole.
    expect(calls.map((s) => s.attributes['rpc.method']).sort()).toEqual(methods);
  });
});

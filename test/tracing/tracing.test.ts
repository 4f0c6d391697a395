import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { JsonRpcError } from '../../src/protocol/errors.js';
import { silentLogger } from '../../src/peer/logger.js';
import { loadTracing, noTracing, resolveTracingConfig } from '../../src/tracing/index.js';
import type { Tracing } from '../../src/tracing/index.js';
import { installUpstreamRoutes, resolveUpstreamsConfig } from '../../src/upstream/index.js';
import { openRawSocket, startGateway } from '../support/gateway.js';
import { installRecordingTracer } from './in-memory-tracer.js';
import type { RecordedSpan } from './in-memory-tracer.js';

const CLIENT_TRACE = '0af7651916cd43dd8448eb211c80319c';
const CLIENT_SPAN = 'b7ad6b7169203331';
const CLIENT_TRACEPARENT = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`;

/** A stand-in upstream: answers every POST with a JSON-RPC result and keeps its headers. */
async function startUpstream(): Promise<{
  url: string;
  seen: IncomingHttpHeaders[];
  server: Server;
}> {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"jsonrpc":"2.0","id":1,"result":"from upstream"}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/`, seen, server };
}

/**
 * A gateway that routes `orders.*` to `upstreamUrl` with installUpstreamRoutes, as gateway mode
 * does; a middleware notes the traceparent each call carried.
 */
async function routeThroughUpstream(tracing: Tracing, upstreamUrl: string) {
  const seenByHandler: (string | undefined)[] = [];
  const running = await startGateway({
    middleware: [
      (ctx, next) => {
        seenByHandler.push(ctx.traceparent);
        return next();
      },
    ],
  });
  const routes = installUpstreamRoutes(
    running.gateway,
    resolveUpstreamsConfig({
      upstreams: { orders: { url: upstreamUrl } },
      methods: { 'orders.*': 'orders' },
    }),
    { logger: silentLogger, tracing },
  );
  return { ...running, routes, seenByHandler };
}

function byName(spans: RecordedSpan[], name: string): RecordedSpan {
  const found = spans.filter((s) => s.name === name);
  expect(found).toHaveLength(1);
  return found[0]!;
}

describe('noTracing', () => {
  it('returns the promise run returns, and passes the parent through', async () => {
    const result = Promise.resolve(42);
    const seen: (string | undefined)[] = [];
    const returned = noTracing.span('rpc.call x', {}, CLIENT_TRACEPARENT, (span) => {
      seen.push(span.traceparent);
      span.setError(new Error('ignored'));
      return result;
    });
    expect(returned).toBe(result);
    expect(await returned).toBe(42);
    expect(seen).toEqual([CLIENT_TRACEPARENT]);
  });

  it('allocates no span without a parent: the same frozen span every time', async () => {
    const spans: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      await noTracing.span('rpc.call x', {}, undefined, (span) => {
        spans.push(span);
        return Promise.resolve();
      });
    }
    expect(new Set(spans).size).toBe(1);
    expect(Object.isFrozen(spans[0])).toBe(true);
    expect((spans[0] as { traceparent: unknown }).traceparent).toBeUndefined();
  });

  it('is what loadTracing gives when tracing is off, and no span reaches a provider', async () => {
    const recorder = installRecordingTracer();
    try {
      const tracing = await loadTracing(resolveTracingConfig(undefined));
      expect(tracing).toBe(noTracing);
      await tracing.span('rpc.call x', {}, CLIENT_TRACEPARENT, () => Promise.resolve());
      expect(recorder.spans).toEqual([]);
    } finally {
      recorder.uninstall();
    }
  });
});

describe('resolveTracingConfig', () => {
  it('is off without the section, on with it unless enabled is false', () => {
    expect(resolveTracingConfig(undefined)).toEqual({
      enabled: false,
      serviceName: 'wsrpc-gateway',
    });
    expect(resolveTracingConfig({})).toEqual({ enabled: true, serviceName: 'wsrpc-gateway' });
    expect(resolveTracingConfig({ enabled: false, serviceName: 'edge' })).toEqual({
      enabled: false,
      serviceName: 'edge',
    });
  });

  it.each([
    [null, TypeError, 'tracing must be an object, not null'],
    [[], TypeError, 'tracing must be an object, not []'],
    [{ enabled: 'yes' }, TypeError, 'tracing.enabled must be a boolean, not "yes"'],
    [{ serviceName: '' }, TypeError, 'tracing.serviceName must be a non-empty string, not ""'],
    [{ serviceName: 7 }, TypeError, 'tracing.serviceName must be a non-empty string, not 7'],
    [
      { servicename: 'x' },
      TypeError,
      'tracing.servicename is not an option of tracing (did you mean tracing.serviceName?)',
    ],
  ])('refuses %j', (value, type, message) => {
    expect(() => resolveTracingConfig(value)).toThrow(type);
    expect(() => resolveTracingConfig(value)).toThrow(message);
  });
});

describe('tracing through OpenTelemetry', () => {
  let recorder: ReturnType<typeof installRecordingTracer>;
  let tracing: Tracing;
  const closers: (() => Promise<unknown>)[] = [];

  beforeEach(async () => {
    recorder = installRecordingTracer();
    tracing = await loadTracing({ enabled: true, serviceName: 'edge-gateway' });
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    recorder.uninstall();
  });

  async function setup() {
    const upstream = await startUpstream();
    closers.push(() => new Promise((resolve) => upstream.server.close(resolve)));
    const { gateway, url, httpUrl, routes, seenByHandler } = await routeThroughUpstream(
      tracing,
      upstream.url,
    );
    closers.push(() => gateway.close());
    closers.push(() => routes.close());
    return { upstream, url, httpUrl, seenByHandler };
  }

  function expectTree(spans: RecordedSpan[], upstreamHeaders: IncomingHttpHeaders) {
    const call = byName(spans, 'rpc.call orders.*');
    const request = byName(spans, 'upstream.request orders');
    expect(call).toMatchObject({
      tracer: 'edge-gateway',
      kind: SpanKind.SERVER,
      traceId: CLIENT_TRACE,
      parentSpanId: CLIENT_SPAN,
      attributes: { 'rpc.method': 'orders.get', 'wsrpc.upstream': 'orders' },
      ended: true,
    });
    expect(request).toMatchObject({
      kind: SpanKind.CLIENT,
      traceId: CLIENT_TRACE,
      parentSpanId: call.spanId,
      attributes: { 'rpc.method': 'orders.get', 'wsrpc.upstream': 'orders' },
      ended: true,
    });
    expect(upstreamHeaders['traceparent']).toBe(`00-${CLIENT_TRACE}-${request.spanId}-01`);
  }

  it('a request member traceparent -> rpc.call -> upstream.request -> the upstream header', async () => {
    const { upstream, url, seenByHandler } = await setup();
    const raw = await openRawSocket(url);
    raw.socket.send(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'orders.get',
        params: {},
        traceparent: CLIENT_TRACEPARENT,
      }),
    );
    const [reply] = await raw.waitFor(1);
    raw.close();
    expect(JSON.parse(reply!)).toEqual({ jsonrpc: '2.0', id: 1, result: 'from upstream' });
    expect(seenByHandler).toEqual([CLIENT_TRACEPARENT]);
    expectTree(recorder.spans, upstream.seen[0]!);
  });

  it('the traceparent header of an HTTP POST, for each request of the body without its own', async () => {
    const { upstream, httpUrl, seenByHandler } = await setup();
    const own = `00-${'1'.repeat(32)}-${'2'.repeat(16)}-00`;
    const res = await fetch(`${httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: CLIENT_TRACEPARENT },
      body: JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'orders.get' },
        { jsonrpc: '2.0', id: 2, method: 'orders.get', traceparent: own },
      ]),
    });
    expect(res.status).toBe(200);
    expect(seenByHandler.sort()).toEqual([own, CLIENT_TRACEPARENT].sort());
    const headerTrace = recorder.spans.filter((s) => s.traceId === CLIENT_TRACE);
    expectTree(
      headerTrace,
      upstream.seen.find((h) => h['traceparent']!.includes(CLIENT_TRACE))!,
    );
    const ownCall = recorder.spans.find(
      (s) => s.traceId === '1'.repeat(32) && s.name.startsWith('rpc.call'),
    );
    expect(ownCall?.parentSpanId).toBe('2'.repeat(16));
  });

  it.each([
    ['absent', undefined],
    ['not a string', 42],
    ['upper case', CLIENT_TRACEPARENT.toUpperCase()],
    ['another version', `01-${CLIENT_TRACE}-${CLIENT_SPAN}-01`],
    ['an all-zero trace id', `00-${'0'.repeat(32)}-${CLIENT_SPAN}-01`],
    ['an all-zero span id', `00-${CLIENT_TRACE}-${'0'.repeat(16)}-01`],
    ['too long', `${CLIENT_TRACEPARENT}-00`],
    ['a header injection', `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01\r\nx: y`],
  ])('a traceparent %s is ignored: the call starts a new trace', async (_what, value) => {
    const { upstream, url, seenByHandler } = await setup();
    const raw = await openRawSocket(url);
    raw.socket.send(
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'orders.get', traceparent: value }),
    );
    await raw.waitFor(1);
    raw.close();
    expect(seenByHandler).toEqual([undefined]);
    const call = byName(recorder.spans, 'rpc.call orders.*');
    expect(call.parentSpanId).toBeUndefined();
    expect(call.traceId).not.toBe(CLIENT_TRACE);
    const request = byName(recorder.spans, 'upstream.request orders');
    expect(upstream.seen[0]!['traceparent']).toBe(`00-${call.traceId}-${request.spanId}-01`);
  });

  it('ctx.traceparent is in a middleware context too', async () => {
    const seen: (string | undefined)[] = [];
    const { gateway, url } = await startGateway({
      middleware: [
        (ctx, next) => {
          seen.push(ctx.traceparent);
          return next();
        },
      ],
    });
    closers.push(() => gateway.close());
    gateway.method('echo', (_p, ctx) => ctx.traceparent ?? null);
    const raw = await openRawSocket(url);
    raw.socket.send(
      JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'echo', traceparent: CLIENT_TRACEPARENT }),
    );
    const [reply] = await raw.waitFor(1);
    raw.close();
    expect(JSON.parse(reply!)).toMatchObject({ result: CLIENT_TRACEPARENT });
    expect(seen).toEqual([CLIENT_TRACEPARENT]);
  });

  it('a rejection marks the span failed with its JSON-RPC code and passes on unchanged', async () => {
    const error = new JsonRpcError(-32012, 'Upstream timeout');
    const outcome = tracing.span('upstream.request orders', {}, CLIENT_TRACEPARENT, () =>
      Promise.reject(error),
    );
    await expect(outcome).rejects.toBe(error);
    const span = byName(recorder.spans, 'upstream.request orders');
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'Upstream timeout' });
    expect(span.attributes['rpc.jsonrpc.error_code']).toBe(-32012);
    expect(span.exceptions).toEqual([error]);
    expect(span.ended).toBe(true);
  });

  it('setError marks the span once, and the span is active while run runs', async () => {
    let inner: string | undefined;
    await tracing.span('pubsub.publish news', { topic: 'news' }, undefined, (span) => {
      span.setError(new Error('first'));
      span.setError(new Error('second'));
      inner = trace.getActiveSpan()?.spanContext().spanId;
      return Promise.resolve();
    });
    const span = byName(recorder.spans, 'pubsub.publish news');
    expect(span.kind).toBe(SpanKind.PRODUCER);
    expect(span.status?.message).toBe('first');
    expect(inner).toBe(span.spanId);
  });

  it('with no provider registered, spans are not recorded and the parent passes through', async () => {
    recorder.uninstall();
    const untraced = await loadTracing({ enabled: true });
    let seen: string | undefined;
    await untraced.span('rpc.call x', {}, CLIENT_TRACEPARENT, (span) => {
      seen = span.traceparent;
      return Promise.resolve();
    });
    expect(seen).toBe(CLIENT_TRACEPARENT);
  });
});

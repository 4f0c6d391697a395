/**
 * W3C `tracestate` as a member of a request object on an in-band transport (WebSocket, TCP),
 * beside its `traceparent` member: handlers, middleware and streams read it as `ctx.tracestate`
 * (its list-members as they go on), and a routed call's upstream gets it as its `tracestate`
 * header, tracing on or off. It is read only beside a valid traceparent, and one that breaks the
 * spec's grammar or bounds is dropped, not the call. A POST /rpc's `tracestate` header reaches
 * the same `ctx.tracestate`, for the requests that take the POST's traceparent.
 */
import { connect } from 'node:net';
import { NEVER } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import type { HandlerContext } from '../../src/peer/handler-context.js';
import { silentLogger } from '../../src/peer/logger.js';
import { MAX_TRACESTATE_MEMBERS, tracestateOf } from '../../src/protocol/traceparent.js';
import type { Session } from '../../src/server/session.js';
import { loadTracing, noTracing } from '../../src/tracing/index.js';
import type { Tracing } from '../../src/tracing/index.js';
import { installUpstreamRoutes, resolveUpstreamsConfig } from '../../src/upstream/index.js';
import { openRawSocket, startGateway } from '../support/gateway.js';
import { headerRecordingUpstream } from './header-recording-upstream.js';
import { installRecordingTracer } from './in-memory-tracer.js';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const TRACEPARENT = `00-${TRACE}-b7ad6b7169203331-01`;
const TRACESTATE = ' congo=t61rcWkgMzE ,, rojo=00f067aa0ba902b7\t';
/** TRACESTATE as it goes on: no spaces around its members, no empty ones. */
const SENT_ON = 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7';

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** What a handler, a middleware or a stream was given, by the method called. */
interface Seen {
  traceparent: string | undefined;
  tracestate: string | undefined;
}
const seenOf = (ctx: HandlerContext<unknown>): Seen => ({
  traceparent: ctx.traceparent,
  tracestate: ctx.tracestate,
});

/**
 * A gateway routing `orders.*` to a real HTTP upstream, with a handler `local` and a stream
 * `feed` of its own, and a middleware: each keeps the trace context it was given.
 */
async function startTracedGateway(tracing: Tracing = noTracing) {
  const upstream = await headerRecordingUpstream(closers);
  const byMiddleware = new Map<string, Seen>();
  const byHandler = new Map<string, Seen>();
  const running = await startGateway({
    middleware: [
      (ctx, next) => {
        byMiddleware.set(ctx.method, seenOf(ctx));
        return next();
      },
    ],
  });
  const { gateway } = running;
  const routes = installUpstreamRoutes(
    gateway,
    resolveUpstreamsConfig({
      upstreams: { orders: { url: upstream.url } },
      methods: { 'orders.*': 'orders' },
    }),
    { logger: silentLogger, tracing },
  );
  closers.push(() => gateway.close({ timeoutMs: 0 }));
  closers.push(() => routes.close());
  gateway.method('local', (_params, ctx: HandlerContext<Session<unknown>>) => {
    byHandler.set('local', seenOf(ctx));
    return 'ok';
  });
  gateway.stream('feed', (_params, ctx) => {
    byHandler.set('feed', seenOf(ctx));
    return NEVER;
  });
  return { ...running, upstream: upstream.seen, byMiddleware, byHandler };
}

/** Send `message` on a WebSocket of its own; resolves with the reply. */
async function overWebSocket(url: string, message: unknown): Promise<{ result?: unknown }> {
  const raw = await openRawSocket(url);
  try {
    raw.socket.send(JSON.stringify(message));
    return JSON.parse((await raw.waitFor(1))[0]!) as { result?: unknown };
  } finally {
    raw.close();
  }
}

/** Send `message` as one line on a TCP (NDJSON) connection of its own; resolves with the reply. */
async function overTcp(port: number, message: unknown): Promise<{ result?: unknown }> {
  const socket = connect(port, '127.0.0.1');
  try {
    socket.setEncoding('utf8');
    let text = '';
    const line = new Promise<string>((resolve, reject) => {
      socket.on('data', (chunk: string) => {
        text += chunk;
        if (text.includes('\n')) resolve(text.slice(0, text.indexOf('\n')));
      });
      socket.once('error', reject);
    });
    socket.write(`${JSON.stringify(message)}\n`);
    return JSON.parse(await line) as { result?: unknown };
  } finally {
    socket.destroy();
  }
}

const call = (method: string, extra: Record<string, unknown> = {}, id: unknown = 1) => ({
  jsonrpc: '2.0',
  id,
  method,
  ...extra,
});

describe('a tracestate member beside a valid traceparent member', () => {
  it('reaches the middleware, the handler and the upstream, its members as they go on', async () => {
    const running = await startTracedGateway();
    const trace = { traceparent: TRACEPARENT, tracestate: TRACESTATE };
    expect((await overWebSocket(running.url, call('local', trace))).result).toBe('ok');
    expect((await overWebSocket(running.url, call('orders.get', trace))).result).toBe('ok');
    const expected = { traceparent: TRACEPARENT, tracestate: SENT_ON };
    expect(running.byHandler.get('local')).toEqual(expected);
    expect(running.byMiddleware.get('local')).toEqual(expected);
    expect(running.byMiddleware.get('orders.get')).toEqual(expected);
    expect(running.upstream.get('orders.get')).toMatchObject(expected);
  });

  it("reaches a per-subscriber stream's context", async () => {
    const running = await startTracedGateway();
    const reply = await overWebSocket(
      running.url,
      call('subscribe', { params: ['feed'], traceparent: TRACEPARENT, tracestate: 'vendor=abc' }),
    );
    expect(typeof reply.result).toBe('string');
    expect(running.byHandler.get('feed')).toEqual({
      traceparent: TRACEPARENT,
      tracestate: 'vendor=abc',
    });
  });

  it('reaches the handler over TCP as over a WebSocket', async () => {
    const running = await startTracedGateway();
    const tcp = await running.gateway.listenTcp(0, '127.0.0.1');
    const trace = { traceparent: TRACEPARENT, tracestate: 'vendor=abc' };
    expect((await overTcp(tcp.port, call('local', trace))).result).toBe('ok');
    expect(running.byHandler.get('local')!.tracestate).toBe('vendor=abc');
  });

  it('tracing on: the upstream gets the span traceparent and the tracestate', async () => {
    const recorder = installRecordingTracer();
    closers.push(() => Promise.resolve(recorder.uninstall()));
    const running = await startTracedGateway(await loadTracing({ enabled: true }));
    const trace = { traceparent: TRACEPARENT, tracestate: 'vendor=abc' };
    expect((await overWebSocket(running.url, call('orders.get', trace))).result).toBe('ok');
    const request = recorder.spans.find((span) => span.name === 'upstream.request orders')!;
    expect(running.upstream.get('orders.get')).toMatchObject({
      traceparent: `00-${TRACE}-${request.spanId}-01`,
      tracestate: 'vendor=abc',
    });
  });

  it.each([
    ['breaks the grammar', 'Vendor=abc'],
    ['is not a string', 42],
    ['names a key twice', 'a=1,a=2'],
    [`has more than ${MAX_TRACESTATE_MEMBERS} list-members`, 'a=1' + ','.repeat(32)],
    ['is a long run of spaces inside a member', `a=${' '.repeat(200_000)}x`],
  ])('one that %s is dropped, the call served with its traceparent', async (_what, tracestate) => {
    const running = await startTracedGateway();
    const trace = { traceparent: TRACEPARENT, tracestate };
    expect((await overWebSocket(running.url, call('local', trace))).result).toBe('ok');
    expect((await overWebSocket(running.url, call('orders.get', trace))).result).toBe('ok');
    expect(running.byHandler.get('local')).toEqual({
      traceparent: TRACEPARENT,
      tracestate: undefined,
    });
    expect(running.upstream.get('orders.get')!['traceparent']).toBe(TRACEPARENT);
    expect(running.upstream.get('orders.get')!['tracestate']).toBeUndefined();
  });
});

describe('a tracestate member without a valid traceparent member', () => {
  it.each([
    ['no traceparent', {}],
    ['an invalid traceparent', { traceparent: 'bad' }],
  ])('is not read (%s)', async (_what, traceparent) => {
    const running = await startTracedGateway();
    const trace = { ...traceparent, tracestate: 'vendor=abc' };
    expect((await overWebSocket(running.url, call('local', trace))).result).toBe('ok');
    expect((await overWebSocket(running.url, call('orders.get', trace))).result).toBe('ok');
    expect(running.byHandler.get('local')).toEqual({
      traceparent: undefined,
      tracestate: undefined,
    });
    expect(running.upstream.get('orders.get')!['traceparent']).toBeUndefined();
    expect(running.upstream.get('orders.get')!['tracestate']).toBeUndefined();
  });
});

describe("a POST /rpc's tracestate header", () => {
  it('reaches ctx.tracestate of the requests that take its traceparent, and their upstream', async () => {
    const running = await startTracedGateway();
    const own = `00-${'1'.repeat(32)}-${'2'.repeat(16)}-00`;
    const response = await fetch(`${running.httpUrl}/rpc`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        traceparent: TRACEPARENT,
        tracestate: TRACESTATE,
      },
      body: JSON.stringify([
        call('local', {}, 1),
        call('orders.header', {}, 2),
        call('orders.own', { traceparent: own }, 3),
        call('orders.ownstate', { traceparent: own, tracestate: 'mine=1' }, 4),
        // Without a valid traceparent of its own, a request takes the header's, with its state.
        call('orders.badown', { traceparent: 'bad', tracestate: 'mine=1' }, 5),
      ]),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toHaveLength(5);
    const header = { traceparent: TRACEPARENT, tracestate: SENT_ON };
    expect(running.byHandler.get('local')).toEqual(header);
    expect(running.upstream.get('orders.header')).toMatchObject(header);
    expect(running.upstream.get('orders.badown')).toMatchObject(header);
    expect(running.upstream.get('orders.own')!['traceparent']).toBe(own);
    expect(running.upstream.get('orders.own')!['tracestate']).toBeUndefined();
    expect(running.upstream.get('orders.ownstate')).toMatchObject({
      traceparent: own,
      tracestate: 'mine=1',
    });
  });

  it('an invalid one is dropped, the call served', async () => {
    const running = await startTracedGateway();
    const response = await fetch(`${running.httpUrl}/rpc`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        traceparent: TRACEPARENT,
        tracestate: 'Vendor=abc',
      },
      body: JSON.stringify(call('local')),
    });
    expect(((await response.json()) as { result: unknown }).result).toBe('ok');
    expect(running.byHandler.get('local')).toEqual({
      traceparent: TRACEPARENT,
      tracestate: undefined,
    });
  });
});

describe('tracestateOf: list-members and length', () => {
  it.each([
    [
      'empty list-members count toward the bound',
      `a=1${','.repeat(MAX_TRACESTATE_MEMBERS)}`,
      undefined,
    ],
    [
      `${MAX_TRACESTATE_MEMBERS} list-members, empty ones among them`,
      `a=1${','.repeat(MAX_TRACESTATE_MEMBERS - 1)}`,
      'a=1',
    ],
    ['a long run of spaces before a comma', `a=1${' '.repeat(200_000)},b=2`, 'a=1,b=2'],
    // Linear in the value's length: trimmed by a regular expression anchored at the end, a run
    // that does not end its member is tried again from each of its characters, in time growing
    // with the square of its length (tens of seconds for this one).
    ['a long run of spaces and tabs inside a member', `a=${' \t'.repeat(150_000)}x`, undefined],
  ])('%s', (_what, value, expected) => {
    expect(tracestateOf(value)).toBe(expected);
  });
});

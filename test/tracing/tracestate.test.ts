/**
 * W3C `tracestate`: the header of a POST /rpc goes on to the upstream with the traceparent it
 * came with (its list-members as they go on: no spaces around them, no empty ones), tracing on
 * or off; one that breaks the spec's grammar or bounds is dropped, not the request.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import {
  MAX_TRACESTATE_CHARS,
  MAX_TRACESTATE_MEMBERS,
  tracestateOf,
} from '../../src/protocol/traceparent.js';
import { loadTracing, noTracing } from '../../src/tracing/index.js';
import type { Tracing } from '../../src/tracing/index.js';
import { installUpstreamRoutes, resolveUpstreamsConfig } from '../../src/upstream/index.js';
import { startGateway } from '../support/gateway.js';
import { headerRecordingUpstream } from './header-recording-upstream.js';
import { installRecordingTracer } from './in-memory-tracer.js';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const TRACEPARENT = `00-${TRACE}-b7ad6b7169203331-01`;

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A gateway routing `orders.*` to an upstream; POST `body` with `headers` to it. */
async function postThrough(
  tracing: Tracing,
  headers: Record<string, string>,
  body: unknown,
): Promise<Map<string, IncomingHttpHeaders>> {
  const upstream = await headerRecordingUpstream(closers);
  const { gateway, httpUrl } = await startGateway({});
  const routes = installUpstreamRoutes(
    gateway,
    resolveUpstreamsConfig({
      upstreams: { orders: { url: upstream.url } },
      methods: { 'orders.*': 'orders' },
    }),
    { logger: silentLogger, tracing },
  );
  closers.push(() => gateway.close());
  closers.push(() => routes.close());
  const response = await fetch(`${httpUrl}/rpc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(200);
  await response.text();
  return upstream.seen;
}

const call = (method: string, id = 1, extra: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id,
  method,
  ...extra,
});

describe('tracestateOf: W3C grammar and bounds', () => {
  const members = (count: number) => Array.from({ length: count }, (_, i) => `k${i}=v`).join(',');
  it.each([
    ['one member', 'vendor=abc', 'vendor=abc'],
    ['spaces, tabs and empty members', ' a=1 ,, \tb=2\t,', 'a=1,b=2'],
    ['a multi-tenant key', 't1@sys=x', 't1@sys=x'],
    ['a space inside a value', 'a=b c', 'a=b c'],
    [`${MAX_TRACESTATE_MEMBERS} members`, members(MAX_TRACESTATE_MEMBERS), members(32)],
    ['a value of 256 characters', `a=${'x'.repeat(256)}`, `a=${'x'.repeat(256)}`],
    [`${MAX_TRACESTATE_MEMBERS + 1} members`, members(MAX_TRACESTATE_MEMBERS + 1), undefined],
    ['a value of 257 characters', `a=${'x'.repeat(257)}`, undefined],
    [
      `more than ${MAX_TRACESTATE_CHARS} characters`,
      Array.from({ length: 3 }, (_, i) => `k${i}=${'v'.repeat(200)}`).join(','),
      undefined,
    ],
    ['an upper-case key', 'Vendor=abc', undefined],
    ['a simple key starting with a digit', '1a=x', undefined],
    ['a key twice', 'a=1,a=2', undefined],
    ['an = in a value', 'a=b=c', undefined],
    ['no value', 'a=', undefined],
    ['no =', 'vendor', undefined],
    ['a control character', 'a=b\u0001', undefined],
    ['nothing but commas', ' , ,', undefined],
    ['not a string', 42, undefined],
  ])('%s', (_what, value, expected) => {
    expect(tracestateOf(value)).toBe(expected);
  });
});

describe('the tracestate header of a POST /rpc', () => {
  it('goes to the upstream with the header traceparent; not with a request that has its own', async () => {
    const own = `00-${'1'.repeat(32)}-${'2'.repeat(16)}-00`;
    const seen = await postThrough(
      noTracing,
      { traceparent: TRACEPARENT, tracestate: 'congo=t61rcWkgMzE , rojo=00f067aa0ba902b7' },
      [call('orders.header', 1), call('orders.own', 2, { traceparent: own })],
    );
    expect(seen.get('orders.header')).toMatchObject({
      traceparent: TRACEPARENT,
      tracestate: 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7',
    });
    expect(seen.get('orders.own')!['traceparent']).toBe(own);
    expect(seen.get('orders.own')!['tracestate']).toBeUndefined();
  });

  it.each([
    ['an invalid tracestate', { traceparent: TRACEPARENT, tracestate: 'Vendor=abc' }, TRACEPARENT],
    ['a tracestate without a traceparent', { tracestate: 'vendor=abc' }, undefined],
    [
      'a tracestate with an invalid traceparent',
      { traceparent: 'bad', tracestate: 'vendor=abc' },
      undefined,
    ],
  ])('%s is dropped, the call served', async (_what, headers, traceparent) => {
    const seen = await postThrough(noTracing, headers, call('orders.get'));
    expect(seen.get('orders.get')!['traceparent']).toBe(traceparent);
    expect(seen.get('orders.get')!['tracestate']).toBeUndefined();
  });

  it('tracing on: the upstream gets the span traceparent and the tracestate', async () => {
    const recorder = installRecordingTracer();
    closers.push(() => Promise.resolve(recorder.uninstall()));
    const tracing = await loadTracing({ enabled: true });
    const seen = await postThrough(
      tracing,
      { traceparent: TRACEPARENT, tracestate: 'vendor=abc' },
      call('orders.get'),
    );
    const request = recorder.spans.find((span) => span.name === 'upstream.request orders')!;
    expect(seen.get('orders.get')).toMatchObject({
      traceparent: `00-${TRACE}-${request.spanId}-01`,
      tracestate: 'vendor=abc',
    });
  });
});

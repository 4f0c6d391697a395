import { describe, expect, it } from 'vitest';
import { resolveUpstreamsConfig, upstreamDefaults } from '../../src/upstream/upstreams-config.js';

const url = 'http://orders:9000/rpc';
const withUpstream = (orders: unknown, methods: unknown = {}) =>
  resolveUpstreamsConfig({ upstreams: { orders }, methods });

describe('resolveUpstreamsConfig', () => {
  it('fills the defaults and resolves routes by name or object', () => {
    const config = resolveUpstreamsConfig({
      upstreams: {
        orders: { url },
        billing: { nats: { url: 'nats://nats:4222', subject: 'billing.rpc' }, timeoutMs: 2000 },
      },
      methods: {
        'orders.*': 'orders',
        'billing.charge': { upstream: 'billing', timeoutMs: 1000, idempotent: true },
      },
      listen: { port: 8080 },
    });
    expect(config.upstreams.get('orders')).toEqual({
      name: 'orders',
      kind: 'http',
      url,
      timeoutMs: upstreamDefaults.timeoutMs,
      maxConcurrent: upstreamDefaults.maxConcurrent,
      maxConcurrentPerSession: upstreamDefaults.maxConcurrent / 8,
      maxConcurrentPerAddress: upstreamDefaults.maxConcurrent / 4,
      maxConcurrentPerUser: upstreamDefaults.maxConcurrent / 4,
      reservedForNewCallers: upstreamDefaults.maxConcurrent / 8,
      retries: 0,
      connections: upstreamDefaults.maxConcurrent,
      headers: {},
    });
    expect(config.upstreams.get('billing')).toMatchObject({
      kind: 'nats',
      servers: ['nats://nats:4222'],
      subject: 'billing.rpc',
      timeoutMs: 2000,
    });
    expect(config.routes).toEqual([
      { pattern: 'orders.*', upstream: 'orders', timeoutMs: 10_000, idempotent: false },
      { pattern: 'billing.charge', upstream: 'billing', timeoutMs: 1000, idempotent: true },
    ]);
    expect(resolveUpstreamsConfig({})).toEqual({ upstreams: new Map(), routes: [] });
  });

  it.each([
    [
      { url, timeoutMs: -5 },
      'upstreams.orders.timeoutMs must be an integer from 1 to 2147483647, not -5',
    ],
    [
      { url, timeoutMs: 1.5 },
      'upstreams.orders.timeoutMs must be an integer from 1 to 2147483647, not 1.5',
    ],
    [
      { url, maxConcurrent: 0 },
      'upstreams.orders.maxConcurrent must be an integer from 1 to 100000, not 0',
    ],
    [{ url, retries: 6 }, 'upstreams.orders.retries must be an integer from 0 to 5, not 6'],
    [{ url, retries: '1' }, 'upstreams.orders.retries must be an integer from 0 to 5, not "1"'],
    [
      { url, connections: 100_001 },
      'upstreams.orders.connections must be an integer from 1 to 100000, not 100001',
    ],
    [{ url: 'ftp://x/rpc' }, 'upstreams.orders.url must be an http(s) URL, not "ftp://x/rpc"'],
    [{ url: 'not a url' }, 'upstreams.orders.url must be an http(s) URL, not "not a url"'],
    [{ url: 42 }, 'upstreams.orders.url must be an http(s) URL, not 42'],
    [
      { url: 'http://u:p@x/rpc' },
      'upstreams.orders.url must be an http(s) URL without credentials (use headers), not "http://***@x/rpc"',
    ],
    [
      { url, headers: { 'bad name': 'x' } },
      'upstreams.orders.headers.bad name must be a valid header name, not "bad name"',
    ],
    [
      { url, headers: { 'x-key': 7 } },
      'upstreams.orders.headers.x-key must be a string of visible ASCII, not a number',
    ],
    [
      { url, timeout: 5 },
      'upstreams.orders.timeout is not an option of an upstream (did you mean upstreams.orders.timeoutMs?)',
    ],
    [{}, 'upstreams.orders must have either url (HTTP) or nats, not neither'],
    [
      { url, nats: { url: 'nats://n', subject: 's' } },
      'upstreams.orders must have either url (HTTP) or nats, not both',
    ],
    ['http://x', 'upstreams.orders must be an object ({ url } or { nats }), not "http://x"'],
    [{ nats: { url: 'nats://n' } }, 'upstreams.orders.nats.subject is required'],
    [{ nats: { subject: 's' } }, 'upstreams.orders.nats.url is required'],
    [
      { nats: { url: [], subject: 's' } },
      'upstreams.orders.nats.url must be a nats:// or tls:// URL or a non-empty array of them, not []',
    ],
    [
      { nats: { url: 'redis://n', subject: 's' } },
      'upstreams.orders.nats.url must be a nats:// or tls:// URL or a non-empty array of them, not "redis://n"',
    ],
    [
      { nats: { url: 'nats://n', subject: 'a.*' } },
      'upstreams.orders.nats.subject must be a NATS subject without wildcards or spaces, not "a.*"',
    ],
    [
      { nats: { url: 'nats://n', subject: 's', sub: 1 } },
      'upstreams.orders.nats.sub is not an option of a NATS upstream',
    ],
    [
      { nats: { url: 'nats://n', subject: 's' }, connections: 2 },
      'upstreams.orders.connections applies to HTTP upstreams only',
    ],
    [
      { nats: 'nats://n' },
      'upstreams.orders.nats must be an object ({ url, subject }), not "nats://n"',
    ],
  ])('refuses the upstream %j', (orders, message) => {
    expect(() => withUpstream(orders)).toThrow(message);
  });

  // Framing and connection headers the HTTP client sets per request: with one, every call failed.
  it.each(['Content-Length', 'transfer-encoding', 'expect', 'connection', 'upgrade'])(
    'refuses the header %s, which the HTTP client sets per request',
    (header) => {
      expect(() => withUpstream({ url, headers: { [header]: '1' } })).toThrow(
        `upstreams.orders.headers.${header} must be left out: it is set for each request by the HTTP client (framing or connection), not "${header}"`,
      );
    },
  );

  it.each([
    [{ 'orders.*': 'billing' }, 'methods.orders.* must name an upstream ("orders"), not "billing"'],
    [
      { 'orders.get': { upstream: 'nope' } },
      'methods.orders.get.upstream must name an upstream ("orders"), not "nope"',
    ],
    [{ 'orders.get': {} }, 'methods.orders.get.upstream is required'],
    [
      { 'orders.get': 7 },
      'methods.orders.get must be the name of an upstream or an object ({ upstream, timeoutMs, idempotent }), not 7',
    ],
    [
      { 'orders.get': { upstream: 'orders', timeoutMs: 0 } },
      'methods.orders.get.timeoutMs must be an integer from 1 to 2147483647, not 0',
    ],
    [
      { 'orders.get': { upstream: 'orders', idempotent: 'yes' } },
      'methods.orders.get.idempotent must be a boolean, not "yes"',
    ],
    [
      { 'orders.get': { upstream: 'orders', retry: 1 } },
      'methods.orders.get.retry is not an option of a route',
    ],
    [
      { 'orders.*.get': 'orders' },
      'methods.orders.*.get: a route is an exact method name or a prefix ending in "*", not "orders.*.get"',
    ],
    [{ 'rpc.*': 'orders' }, 'methods.rpc.*: method names starting with "rpc." are reserved'],
  ])('refuses the routes %j', (methods, message) => {
    expect(() => withUpstream({ url }, methods)).toThrow(message);
  });

  it('refuses sections that are not objects, and a route to no declared upstream', () => {
    expect(() => resolveUpstreamsConfig({ upstreams: [] })).toThrow(
      'upstreams must be an object of upstreams by name, not []',
    );
    expect(() => resolveUpstreamsConfig({ methods: 'orders' })).toThrow(
      'methods must be an object of routes by method name, not "orders"',
    );
    expect(() => resolveUpstreamsConfig({ methods: { a: 'x' } })).toThrow(
      'methods.a must name an upstream (none is declared), not "x"',
    );
  });
});

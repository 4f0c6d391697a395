/**
 * An upstream's reply is held to the JSON limits a client's message is held to: more values
 * than `limits.maxJsonValues` (a reply of hundreds of thousands of tiny values, well within
 * `maxMessageBytes`) or nesting deeper than `limits.maxDepth`, counted on the reply's text with
 * its envelope as a client's message is counted, fails the call -32011 with `data: { upstream,
 * reason, bound, limit }`, logged and counted as the upstream's other failures are; the gateway
 * goes on serving. Over HTTP and over NATS, which read replies the same way.
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { nanoid } from 'nanoid';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NATS_URL } from '../support/brokers.js';
import { CaptureLogger, logged } from '../support/logging.js';
import { httpGet } from '../support/network.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

/** The gateway with small limits: 8 levels, 50 values. */
const MAX_DEPTH = 8;
const MAX_VALUES = 50;

/**
 * The result each method answers, as text. A reply is `{"jsonrpc":"2.0","id":N,"result":R}`:
 * its object, `"2.0"` and its id are 3 values (keys count none), and level 1 of its nesting.
 */
function resultOf(method: string): string {
  const [name, n] = method.split('.').slice(1) as [string, string];
  const count = Number(n);
  if (name === 'values') return `[${Array<string>(count).fill('0').join(',')}]`;
  if (name === 'deep') return '['.repeat(count) + ']'.repeat(count);
  return '"ok"';
}

/** The reply to the request `body` (its gateway id, its method's result). */
function replyTo(body: string): string {
  const { id, method } = JSON.parse(body) as { id: number; method: string };
  return `{"jsonrpc":"2.0","id":${id},"result":${resultOf(method)}}`;
}

const logger = new CaptureLogger();
let http: Server;
let responder: NatsConnection;
const subject = `test.reply-limits.${nanoid(8)}`;
/** The gateway with MAX_DEPTH and MAX_VALUES, and one with the default limits. */
let small: RoutedGateway;
let defaults: RoutedGateway;

beforeAll(async () => {
  http = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => res.writeHead(200).end(replyTo(body)));
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/rpc`;
  responder = await connect({ servers: NATS_URL });
  const subscription = responder.subscribe(subject);
  void (async () => {
    for await (const msg of subscription) msg.respond(replyTo(msg.string()));
  })();
  const config = {
    upstreams: { web: { url }, bus: { nats: { url: NATS_URL, subject } } },
    methods: { 'web.*': 'web', 'bus.*': 'bus' },
  };
  small = await startRoutedGateway(config, {
    logger,
    // Each test reads the metrics as they are then, not a text rendered for an earlier scrape.
    limits: { maxDepth: MAX_DEPTH, maxJsonValues: MAX_VALUES, metricsCacheMs: 0 },
  });
  defaults = await startRoutedGateway(config);
  await Promise.all([small.routes.ready, defaults.routes.ready]);
});

afterAll(async () => {
  await small?.close();
  await defaults?.close();
  await responder?.close();
  await new Promise((resolve) => http?.close(resolve));
});

interface Reply {
  result?: unknown;
  error?: { code: number; message: string; data?: Record<string, unknown> };
}

/** The reply to a call of `method` over a plain WebSocket to `gateway`. */
async function call(gateway: RoutedGateway, method: string): Promise<Reply> {
  const socket = new WebSocket(gateway.url);
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  const reply = new Promise<string>((resolve) =>
    socket.once('message', (data: Buffer) => resolve(data.toString())),
  );
  socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method }));
  try {
    return JSON.parse(await reply) as Reply;
  } finally {
    socket.close();
  }
}

describe.each(['web', 'bus'])('a %s upstream reply past the JSON limits', (upstream) => {
  it('holding more than maxJsonValues values, envelope included, fails -32011', async () => {
    // The envelope's 3 values and the array: 46 zeros make 50, one more 51.
    const within = await call(small, `${upstream}.values.46`);
    expect(within.result).toHaveLength(46);
    expect((await call(small, `${upstream}.values.47`)).error).toEqual({
      code: -32011,
      message: 'Upstream unavailable',
      data: {
        upstream,
        reason: 'reply holds too many JSON values',
        bound: 'maxJsonValues',
        limit: MAX_VALUES,
      },
    });
  });

  it('nesting deeper than maxDepth, the envelope level 1, fails -32011', async () => {
    const within = await call(small, `${upstream}.deep.${MAX_DEPTH - 1}`);
    expect(JSON.stringify(within.result)).toBe('['.repeat(7) + ']'.repeat(7));
    expect((await call(small, `${upstream}.deep.${MAX_DEPTH}`)).error).toEqual({
      code: -32011,
      message: 'Upstream unavailable',
      data: { upstream, reason: 'reply nests too deep', bound: 'maxDepth', limit: MAX_DEPTH },
    });
  });

  it('of 300 000 tiny values under maxMessageBytes fails at the default limit', async () => {
    const started = performance.now();
    expect((await call(defaults, `${upstream}.values.300000`)).error).toMatchObject({
      code: -32011,
      data: { upstream, bound: 'maxJsonValues', limit: 10_000 },
    });
    expect(performance.now() - started).toBeLessThan(2_000);
    expect((await call(defaults, `${upstream}.values.9000`)).result).toHaveLength(9000);
    expect((await call(defaults, `${upstream}.deep.65`)).error).toMatchObject({
      code: -32011,
      data: { upstream, reason: 'reply nests too deep', bound: 'maxDepth', limit: 64 },
    });
  });

  it('is logged and counted as the upstream failing, and the gateway serves on', async () => {
    logger.records.splice(0);
    await call(small, `${upstream}.values.1000`);
    const [record] = logged(logger.records, 'upstream request failed');
    expect(record?.obj).toMatchObject({
      upstream,
      reason: 'reply holds too many JSON values',
      detail: `JSON holds more than ${MAX_VALUES} values`,
    });
    const { body } = await httpGet(`${small.httpUrl}/metrics`);
    expect(body).toMatch(
      new RegExp(
        `wsrpc_upstream_requests_total\\{upstream="${upstream}",outcome="unavailable"\\} [1-9]`,
      ),
    );
    expect((await call(small, `${upstream}.plain`)).result).toBe('ok');
  });
});

/**
 * The same service over TCP, newline-delimited JSON: calls both ways, subscriptions with
 * resume across a reconnect, half-close, limits and the authenticate hook.
 */
import { connect } from 'node:net';
import { firstValueFrom, take, toArray } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import {
  MemoryBroker,
  RpcClient,
  UpgradeRejection,
  createGateway,
  silentLogger,
  tcpSocket,
} from '../../src/index.js';
import type { GatewayOptions, SubscriptionEvent } from '../../src/index.js';
import { freePort } from '../support/network.js';
import { waitUntil } from '../support/waiting.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function tcpGateway<C = unknown>(options: GatewayOptions<C> = {}, port = 0) {
  const gateway = createGateway<C>({ logger: silentLogger, heartbeatIntervalMs: 0, ...options });
  cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
  const address = await gateway.listenTcp(port, '127.0.0.1');
  return { gateway, port: address.port, url: `tcp://127.0.0.1:${address.port}` };
}

function tcpClient(url: string): RpcClient {
  const client = new RpcClient({
    url,
    WebSocket: tcpSocket(),
    reconnect: { initialDelayMs: 20, maxDelayMs: 100 },
    heartbeat: false,
  });
  cleanups.push(() => client.close());
  return client;
}

/** Write `lines` on a plain TCP connection, optionally end it, and collect what comes back until it closes. */
function rawExchange(port: number, text: string, end: boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => (end ? socket.end(text) : socket.write(text)));
    cleanups.push(() => socket.destroy());
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(received));
  });
}

const lines = (text: string): unknown[] =>
  text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as unknown);

describe('TCP (newline-delimited JSON)', () => {
  it('takes only JSON whitespace (space, tab, CR, LF) around a line: any other is a parse error, as on every transport', async () => {
    const { gateway, port } = await tcpGateway();
    gateway.method('sum', (params: number[]) => params.reduce((a, b) => a + b, 0));
    const call = (id: number): string =>
      JSON.stringify({ jsonrpc: '2.0', method: 'sum', params: [1, id], id });
    // U+00A0, a byte order mark, vertical tab, form feed, U+2028, U+3000: String.prototype.trim
    // takes them off, JSON does not.
    const others = ['\u00a0', '\ufeff', '\u000b', '\u000c', '\u2028', '\u3000'];
    const input = [
      ` \t${call(1)}\t \r`,
      ...others.map((space, i) => `${space}${call(10 + i)}`),
      ...others.map((space, i) => `${call(20 + i)}${space}`),
      ...others,
      call(2),
    ].join('\n');
    const replies = lines(await rawExchange(port, `${input}\n`, true));
    const parseError = {
      jsonrpc: '2.0',
      error: { code: -32700, message: 'Parse error' },
      id: null,
    };
    expect(replies).toEqual([
      { jsonrpc: '2.0', result: 2, id: 1 },
      ...Array.from({ length: others.length * 3 }, () => parseError),
      { jsonrpc: '2.0', result: 3, id: 2 },
    ]);
  });

  it('carries calls both ways and batches', async () => {
    const { gateway, url } = await tcpGateway();
    gateway.method('subtract', ([a, b]: [number, number]) => a - b);
    gateway.method('ask', async (_params, ctx) => ctx.session.call('client.name', []));
    const client = tcpClient(url);
    client.method('client.name', () => 'tcp-client');
    expect(await client.call('subtract', [42, 23])).toBe(19);
    expect(await client.call('ask')).toBe('tcp-client');
    const results = await client.batch([
      { method: 'subtract', params: [1, 1] },
      { method: 'nope' },
    ]);
    expect(results[0]).toEqual({ status: 'fulfilled', value: 0 });
    expect(results[1]).toMatchObject({ status: 'rejected', reason: { code: -32601 } });
    const [session] = gateway.sessions.values();
    expect(session!.transport.kind).toBe('tcp');
    expect(session!.remoteAddress).toMatch(/127\.0\.0\.1/);
  });

  it('delivers topic messages in order and ends per-subscriber streams', async () => {
    const { gateway, url } = await tcpGateway();
    gateway.topic('feed');
    const { interval, map, take: takeN } = await import('rxjs');
    gateway.stream('count', () =>
      interval(1)
        .pipe(takeN(4))
        .pipe(map((i) => 3 - i)),
    );
    const client = tcpClient(url);
    const received = firstValueFrom(
      client.subscribeWithMeta<number>('feed').pipe(take(20), toArray()),
    );
    await waitUntil(
      () => gateway.pubsub.subscriptionCount([...gateway.sessions.values()][0]!) === 1,
      'subscribed',
    );
    for (let i = 1; i <= 20; i++) await gateway.publish('feed', i);
    const events: SubscriptionEvent<number>[] = await received;
    expect(events.map((e) => e.data)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(await firstValueFrom(client.subscribe<number>('count').pipe(toArray()))).toEqual([
      3, 2, 1, 0,
    ]);
  });

  it('resumes a subscription across a reconnect to another gateway on the same port, nothing lost', async () => {
    const broker = new MemoryBroker();
    cleanups.push(() => broker.close());
    const port = await freePort();
    const first = await tcpGateway({ broker }, port);
    first.gateway.topic('feed');
    const client = tcpClient(first.url);
    const seen: number[] = [];
    const subscription = client.subscribe<number>('feed').subscribe((n) => seen.push(n));
    cleanups.push(() => subscription.unsubscribe());
    await waitUntil(
      () =>
        first.gateway.sessions.size === 1 &&
        first.gateway.pubsub.subscriptionCount([...first.gateway.sessions.values()][0]!) === 1,
      'subscribed',
    );
    for (let i = 1; i <= 3; i++) await first.gateway.publish('feed', i);
    await waitUntil(() => seen.length === 3, 'the first three');

    await first.gateway.close({ timeoutMs: 1_000 });
    await waitUntil(() => client.state === 'reconnecting', 'the client to notice');
    // Published while the client is away, through the broker both gateways share.
    for (let i = 4; i <= 6; i++) await broker.publish('feed', JSON.stringify(i));
    const second = await tcpGateway({ broker }, port);
    second.gateway.topic('feed');
    await waitUntil(() => seen.length === 6, 'the missed three, replayed');
    await second.gateway.publish('feed', 7);
    await waitUntil(() => seen.length === 7, 'a live one');
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  it('answers what a half-closed connection sent before closing it', async () => {
    const { gateway, port } = await tcpGateway();
    gateway.method('slow-sum', async (numbers: number[]) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      return numbers.reduce((a, b) => a + b, 0);
    });
    const reply = await rawExchange(
      port,
      '{"jsonrpc":"2.0","method":"slow-sum","params":[1,2],"id":1}\n{"jsonrpc":"2.0","method":"slow-sum","params":[3],"id":2}\n',
      true,
    );
    expect(lines(reply).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))).toEqual(
      [
        { jsonrpc: '2.0', result: 3, id: 1 },
        { jsonrpc: '2.0', result: 3, id: 2 },
      ],
    );
  });

  it('answers a line over maxMessageBytes with -32600 and closes the connection', async () => {
    const { port } = await tcpGateway({ limits: { maxMessageBytes: 64 } });
    const reply = await rawExchange(
      port,
      `${'{"jsonrpc":"2.0","method":"x","params":["' + 'a'.repeat(100)}"]}\n`,
      false,
    );
    expect(lines(reply)).toEqual([
      {
        jsonrpc: '2.0',
        error: { code: -32600, message: 'Message too large', data: { maxMessageBytes: 64 } },
        id: null,
      },
      // NDJSON's close frame: the code a WebSocket would be closed with.
      { jsonrpc: '2.0', method: 'rpc.close', params: { code: 1009, reason: 'message too large' } },
    ]);
  });

  it('runs authenticate with transport "tcp": a refusal is one error line (-32004, status 401) and a close', async () => {
    const requests: { transport: string; remoteAddress: string | undefined }[] = [];
    const { port } = await tcpGateway({
      authenticate: ({ transport, remoteAddress }) => {
        requests.push({ transport, remoteAddress });
        throw new UpgradeRejection(401, 'No token on TCP');
      },
    });
    const reply = await rawExchange(port, '', false);
    expect(lines(reply)).toEqual([
      {
        jsonrpc: '2.0',
        error: { code: -32004, message: 'No token on TCP', data: { status: 401 } },
        id: null,
      },
    ]);
    expect(requests).toHaveLength(1);
    expect(requests[0]!.transport).toBe('tcp');
    expect(requests[0]!.remoteAddress).toMatch(/127\.0\.0\.1/);
  });

  it('closes a refused connection itself, even when the client keeps its side open', async () => {
    const { port } = await tcpGateway({
      authenticate: () => {
        throw new UpgradeRejection(403);
      },
    });
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    cleanups.push(() => socket.destroy());
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('end', () => resolve()));
    expect(lines(received)).toMatchObject([{ error: { code: -32004, data: { status: 403 } } }]);
    // Our side stays open and keeps writing: once the server has destroyed its socket, a write
    // is answered with a reset and ours closes. (A server that kept it would read on forever.)
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const writer = setInterval(() => socket.write('{"jsonrpc":"2.0","method":"x"}\n'), 50);
    cleanups.push(() => clearInterval(writer));
    await closed;
    clearInterval(writer);
    expect(socket.destroyed).toBe(true);
  });

  it('answers what a half-closed connection sent even while an async authorize hook decides', async () => {
    const { gateway, port } = await tcpGateway({
      authorize: async () => {
        await new Promise((resolve) => setTimeout(resolve, 20));
        return true;
      },
    });
    gateway.method('sum', (numbers: number[]) => numbers.reduce((a, b) => a + b, 0));
    const reply = await rawExchange(
      port,
      '{"jsonrpc":"2.0","method":"sum","params":[1,2],"id":1}\n{"jsonrpc":"2.0","method":"sum","params":[4],"id":2}\n',
      true,
    );
    expect(lines(reply)).toEqual([
      { jsonrpc: '2.0', result: 3, id: 1 },
      { jsonrpc: '2.0', result: 4, id: 2 },
    ]);
  });

  it('counts TCP connections against the per-address limit', async () => {
    const { gateway, port, url } = await tcpGateway({ limits: { maxConnectionsPerIp: 1 } });
    gateway.method('ping', () => 'pong');
    const client = tcpClient(url);
    expect(await client.call('ping')).toBe('pong');
    const refused = await rawExchange(port, '', false);
    expect(lines(refused)).toEqual([
      {
        jsonrpc: '2.0',
        error: {
          code: -32000,
          message: 'Too many connections from this address',
          data: { status: 429 },
        },
        id: null,
      },
    ]);
    // Closing the first frees its slot.
    await client.close();
    await waitUntil(() => gateway.sessions.size === 0, 'the session to close');
    const again = tcpClient(url);
    expect(await again.call('ping')).toBe('pong');
  });
});

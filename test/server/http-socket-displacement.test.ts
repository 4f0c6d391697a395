/**
 * limits.maxHttpSockets reached by half-sent requests from several addresses, each within
 * maxHttpSocketsPerIp: a socket from an address holding fewer sockets than another holds
 * half-sent ones takes the place of the oldest half-sent socket of the address holding the
 * most, so no set of addresses keeps the others (and /livez) out. A socket whose headers are in
 * is never cut for it. Every address in 127/8 is loopback on Linux: `localAddress` gives a test
 * many source addresses.
 */
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import { Resources } from '../support/resources.js';
import { sampleValue, scrape } from '../support/metrics.js';
import { waitUntil, within } from '../support/waiting.js';

const res = new Resources();
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await res.cleanup();
});

/** The first lines of a request, without the blank line that ends the headers. */
const HALF_REQUEST = 'GET /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\n';

interface RawSocket {
  readonly from: string;
  /** Resolves once the socket has closed (cut, or answered and closed). */
  closed: Promise<void>;
  isClosed(): boolean;
  /** Everything the server wrote. */
  received(): string;
  socket: Socket;
}

/** A TCP connection from `from` that writes `text` once connected and then waits. */
async function rawSocket(port: number, from: string, text = HALF_REQUEST): Promise<RawSocket> {
  const socket = connect({ port, host: '127.0.0.1', localAddress: from });
  sockets.push(socket);
  let isClosed = false;
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (received += chunk));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) =>
    socket.once('close', () => {
      isClosed = true;
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => {
      socket.write(text);
      resolve();
    });
    socket.once('close', () => reject(new Error(`${from} closed before connecting`)));
  });
  return { from, socket, closed, isClosed: () => isClosed, received: () => received };
}

/** GET `path` from `from` on a fresh connection: the status, or the error's code. */
function get(port: number, path: string, from: string): Promise<number | string> {
  return new Promise((resolve) => {
    const req = httpRequest(
      { host: '127.0.0.1', port, path, localAddress: from, agent: false },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    req.end();
  });
}

/** The sockets the gateway's socket gate counts (a private field). */
function gateSockets(gateway: Gateway): number {
  return (gateway as unknown as { socketGate: { open: number } }).socketGate.open;
}

/** Which of `held` the gateway has closed, by address, in the order they were opened. */
const closedOnes = (held: readonly RawSocket[]) =>
  held.filter((s) => s.isClosed()).map((s) => s.from);

/** `count` half-sent sockets from `from`, each counted by the gateway before the next is opened. */
async function halfSent(
  port: number,
  from: string,
  count: number,
  counted: () => number,
): Promise<RawSocket[]> {
  const opened: RawSocket[] = [];
  for (let i = 0; i < count; i++) {
    const before = counted();
    opened.push(await rawSocket(port, from));
    await waitUntil(() => counted() === before + 1, `socket ${i + 1} from ${from} to be counted`);
  }
  return opened;
}

describe('maxHttpSockets filled by half-sent requests from several addresses', () => {
  it('addresses each at maxHttpSocketsPerIp fill it: a socket from another address, and /livez, take the places of the oldest half-sent sockets of the addresses holding the most', async () => {
    const PER_ADDRESS = 5;
    const ADDRESSES = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'];
    const { gateway, port, httpUrl } = await res.gateway({
      // Long enough that only the bounds, never the timeout, close a socket in this test.
      limits: {
        maxHttpSocketsPerIp: PER_ADDRESS,
        maxHttpSockets: PER_ADDRESS * ADDRESSES.length,
        headersTimeoutMs: 600_000,
      },
    });
    const counted = () => gateSockets(gateway);
    const held: RawSocket[] = [];
    for (const from of ADDRESSES) held.push(...(await halfSent(port, from, PER_ADDRESS, counted)));
    expect(counted()).toBe(PER_ADDRESS * ADDRESSES.length);

    // A half-sent request from another address: in, in place of 127.0.0.2's oldest.
    const newcomer = await rawSocket(port, '127.0.0.99');
    await within(held[0]!.closed, 'the oldest half-sent socket to be cut');
    expect(held[0]!.received()).toBe('');
    expect(closedOnes(held)).toEqual(['127.0.0.2']);
    expect(counted()).toBe(PER_ADDRESS * ADDRESSES.length);

    // /livez from yet another: 127.0.0.2 holds fewer now, so 127.0.0.3 gives one up.
    expect(await get(port, '/livez', '127.0.0.98')).toBe(200);
    await within(held[PER_ADDRESS]!.closed, 'the oldest half-sent socket of 127.0.0.3 to be cut');
    expect(closedOnes(held)).toEqual(['127.0.0.2', '127.0.0.3']);
    expect(newcomer.isClosed()).toBe(false);

    for (const socket of [...held, newcomer]) socket.socket.destroy();
    await waitUntil(() => counted() === 0, 'every socket to leave the count');
    const cut = sampleValue(await scrape(httpUrl), 'rpc_http_sockets_closed_total', {
      reason: 'capacity',
    });
    expect(cut).toBe(2);
  });

  it('a socket from an address holding as many as any other holds half-sent is refused; one from an address holding fewer takes the place of the oldest of the address holding the most', async () => {
    const { gateway, port } = await res.gateway({
      limits: { maxHttpSockets: 4, maxHttpSocketsPerIp: 10, headersTimeoutMs: 600_000 },
    });
    const counted = () => gateSockets(gateway);
    const a = await halfSent(port, '127.0.0.2', 2, counted);
    const b = await halfSent(port, '127.0.0.3', 2, counted);

    // 127.0.0.2 holds 2, as many as the most any address holds: nobody's place is taken.
    const refused = await rawSocket(port, '127.0.0.2');
    await within(refused.closed, 'the socket over the total to be refused');
    expect(closedOnes([...a, ...b])).toEqual([]);

    // 127.0.0.4 holds none: the oldest of 127.0.0.2 (at 2 first) gives its place.
    const c = await rawSocket(port, '127.0.0.4');
    await within(a[0]!.closed, "127.0.0.2's oldest socket to be cut");
    // Now 127.0.0.3 holds the most (2): the next newcomer takes its oldest's place.
    const d = await rawSocket(port, '127.0.0.5');
    await within(b[0]!.closed, "127.0.0.3's oldest socket to be cut");
    expect(closedOnes([...a, ...b, c, d])).toEqual(['127.0.0.2', '127.0.0.3']);
    expect(counted()).toBe(4);
  });

  it('sockets whose headers are in are never cut to make room', async () => {
    const { gateway, port } = await res.gateway({
      limits: { maxHttpSockets: 3, maxHttpSocketsPerIp: 10, headersTimeoutMs: 600_000 },
    });
    const counted = () => gateSockets(gateway);
    // Keep-alive connections whose request was answered: they stay open, idle, headers in.
    const idle: RawSocket[] = [];
    for (let i = 0; i < 3; i++) {
      const socket = await rawSocket(port, '127.0.0.2', 'GET /livez HTTP/1.1\r\nHost: x\r\n\r\n');
      await waitUntil(() => socket.received().includes('\r\n\r\n'), 'the answer');
      idle.push(socket);
    }
    expect(counted()).toBe(3);
    const refused = await rawSocket(port, '127.0.0.3');
    await within(refused.closed, 'the socket over the total to be refused');
    expect(closedOnes(idle)).toEqual([]);
  });
});

/**
 * limits.maxHttpSockets reached by sockets from several addresses, each within
 * maxHttpSocketsPerIp: a socket from an address holding fewer sockets than another holds idle
 * ones (no request under way: half-sent, or kept alive after an answer, idle or trickling the
 * next request) takes the place of the socket idle longest of the address holding the most, so
 * no set of addresses keeps the others (and /livez) out. A socket whose request the server is
 * answering (its body read) is never cut for it; one whose body is still to come may be
 * (http-socket-displacement-bodies.test.ts). Every address in 127/8 is loopback on Linux:
 * `localAddress` gives a test many source addresses.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import { Resources } from '../support/resources.js';
import { filledHttpSocketLimits } from '../support/sockets.js';
import { sampleValue, scrape } from '../support/metrics.js';
import { getStatusFrom, rawTcpSocket } from '../support/raw-tcp.js';
import type { RawTcpSocket } from '../support/raw-tcp.js';
import { waitUntil, within } from '../support/waiting.js';

const res = new Resources();
const sockets: Socket[] = [];
type RawSocket = RawTcpSocket;
const rawSocket = (port: number, from: string, text = HALF_REQUEST): Promise<RawSocket> =>
  rawTcpSocket(sockets, port, from, text);
const get = getStatusFrom;
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await res.cleanup();
});

/**
 * The requests of this process's HTTP servers whose headers are in, and whose responses are sent,
 * as Node tells of them (its diagnostics channels): what a test awaits before the next step, the
 * server's side of an exchange the client has seen.
 */
const requests = { started: 0, answered: 0 };
const onStarted = (): void => void requests.started++;
const onAnswered = (): void => void requests.answered++;
beforeAll(() => {
  subscribe('http.server.request.start', onStarted);
  subscribe('http.server.response.finish', onAnswered);
});
afterAll(() => {
  unsubscribe('http.server.request.start', onStarted);
  unsubscribe('http.server.response.finish', onAnswered);
});

/** The first lines of a request, without the blank line that ends the headers. */
const HALF_REQUEST = 'GET /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\n';

/** The sockets the gateway's socket gate counts (a private field). */
function gateSockets(gateway: Gateway): number {
  return (gateway as unknown as { socketGate: { open: number } }).socketGate.open;
}

/** Which of `held` the gateway has closed, by address, in the order they were opened. */
const closedOnes = (held: readonly RawSocket[]) =>
  held.filter((s) => s.isClosed()).map((s) => s.from);

/**
 * A socket from `from` whose one quick request (GET /livez) has been answered, the server done
 * with its response: kept alive, it waits for its next request.
 */
async function answeredOnce(port: number, from: string): Promise<RawSocket> {
  const answeredBefore = requests.answered;
  const socket = await rawSocket(port, from, 'GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  await waitUntil(() => requests.answered >= answeredBefore + 1, `the answer to ${from}`);
  await waitUntil(() => socket.received().includes('\r\n\r\n'), `${from} to read its answer`);
  return socket;
}

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
      limits: filledHttpSocketLimits(PER_ADDRESS, ADDRESSES.length),
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

  it('kept-alive sockets left idle after one quick request, or trickling their next one, fill it from ten addresses: a newcomer from another address is served, in place of the socket idle longest', async () => {
    const ADDRESSES = Array.from({ length: 10 }, (_, i) => `127.0.0.${i + 2}`);
    const PER_ADDRESS = 2;
    const { gateway, port } = await res.gateway({
      limits: filledHttpSocketLimits(PER_ADDRESS, ADDRESSES.length),
    });
    // Node closes a kept-alive connection idle for keepAliveTimeout: not within this test.
    gateway.httpServer.keepAliveTimeout = 600_000;
    const counted = () => gateSockets(gateway);
    // Per address: one socket that trickles its next request after its answer, one left idle.
    const trickling: RawSocket[] = [];
    const idle: RawSocket[] = [];
    for (const from of ADDRESSES) {
      const first = await answeredOnce(port, from);
      first.socket.write('GET /livez HTTP/1.1\r\n');
      trickling.push(first);
      idle.push(await answeredOnce(port, from));
    }
    expect(counted()).toBe(PER_ADDRESS * ADDRESSES.length);

    expect(await get(port, '/livez', '127.0.0.99')).toBe(200);
    // 127.0.0.2 got to two idle sockets first; its trickling one has been idle longest.
    await within(trickling[0]!.closed, "127.0.0.2's socket idle longest to be cut");
    expect(closedOnes([...trickling, ...idle])).toEqual(['127.0.0.2']);
    expect(trickling[0]!.received().match(/HTTP\/1\.1 200/g)).toHaveLength(1);
  });

  it('a socket whose request the server is answering (its body read) is never cut to make room; once answered and idle again, it is', async () => {
    const { gateway, port } = await res.gateway({
      limits: {
        maxHttpSockets: 2,
        maxHttpSocketsPerIp: 10,
        headersTimeoutMs: 600_000,
        bodyTimeoutMs: 600_000,
      },
    });
    gateway.httpServer.keepAliveTimeout = 600_000;
    // Each call waits until the test lets it return: the server is answering it meanwhile.
    const answer = new Map<number, () => void>();
    gateway.method('wait', (params) => {
      const [n] = params as [number];
      return new Promise<number>((resolve) => answer.set(n, () => resolve(n)));
    });
    const counted = () => gateSockets(gateway);
    const post = (n: number) => {
      const body = JSON.stringify({ jsonrpc: '2.0', id: n, method: 'wait', params: [n] });
      return (
        'POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
        `Content-Length: ${body.length}\r\n\r\n${body}`
      );
    };
    // Two POSTs whose bodies are all in and read: their calls under way.
    const posting = [
      await rawSocket(port, '127.0.0.2', post(0)),
      await rawSocket(port, '127.0.0.2', post(1)),
    ];
    await waitUntil(() => answer.size === 2, 'both calls to begin');
    expect(counted()).toBe(2);

    const refused = await rawSocket(port, '127.0.0.3');
    await within(refused.closed, 'the socket over the total to be refused');
    expect(closedOnes(posting)).toEqual([]);

    // The first one's call is answered: kept alive, it waits for its next request, idle.
    const answeredBefore = requests.answered;
    answer.get(0)!();
    await waitUntil(() => requests.answered >= answeredBefore + 1, 'the call to be answered');
    await waitUntil(() => posting[0]!.received().includes('"result":0'), 'the answer to be read');
    const newcomer = await rawSocket(port, '127.0.0.3');
    await within(posting[0]!.closed, 'the answered, idle socket to be cut');
    expect(closedOnes(posting)).toEqual(['127.0.0.2']);
    expect(newcomer.isClosed()).toBe(false);
    expect(counted()).toBe(2);

    // The other call, untouched, is answered.
    answer.get(1)!();
    await waitUntil(() => posting[1]!.received().includes('"result":1'), 'the other answer');
  });
});

/**
 * limits.maxHttpSockets reached by requests whose headers are in and whose bodies are still to
 * come, from several addresses each within maxHttpSocketsPerIp: POSTs to /rpc whose bodies never
 * come or stop halfway, a session's POSTs waiting unread behind its first, requests with
 * `Upgrade: h2c` served as HTTP/1.1. Each such socket waits on its client, as a half-sent one
 * does: a socket from an address holding fewer takes the place of the one waiting longest of
 * the address holding the most, so they keep neither other addresses nor /livez out. Every
 * address in 127/8 is loopback on Linux: `localAddress` gives a test many source addresses.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sampleValue, scrape } from '../support/metrics.js';
import { getStatusFrom, rawTcpSocket } from '../support/raw-tcp.js';
import type { RawTcpSocket } from '../support/raw-tcp.js';
import { Resources } from '../support/resources.js';
import { filledHttpSocketLimits } from '../support/sockets.js';
import { waitUntil, within } from '../support/waiting.js';

const res = new Resources();
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await res.cleanup();
});

/** Requests of this process's HTTP servers whose headers are in, as Node tells of them. */
let started = 0;
const onStarted = (): void => void started++;
beforeAll(() => subscribe('http.server.request.start', onStarted));
afterAll(() => unsubscribe('http.server.request.start', onStarted));

/** The sockets the gateway's socket gate counts (a private field). */
function gateSockets(gateway: object): number {
  return (gateway as unknown as { socketGate: { open: number } }).socketGate.open;
}

/** Which of `held` the gateway has closed, by address, in the order they were opened. */
const closedOnes = (held: readonly RawTcpSocket[]) =>
  held.filter((s) => s.isClosed()).map((s) => s.from);

/** The first lines of a request, without the blank line that ends the headers. */
const HALF_REQUEST = 'GET /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\n';

/** The head of a POST whose body is `Content-Length: 100` bytes of JSON. */
const postHead = (path: string, extra = '') =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${extra}` +
  'Content-Length: 100\r\n\r\n';

/**
 * `count` requests from `from`, each written as `text(i)` on a socket of its own, each begun
 * (its headers in: `begun` counts it) before the next is opened.
 */
async function requestsBegun(
  port: number,
  from: string,
  count: number,
  text: (i: number) => string,
  begun: () => number,
): Promise<RawTcpSocket[]> {
  const opened: RawTcpSocket[] = [];
  for (let i = 0; i < count; i++) {
    const before = begun();
    opened.push(await rawTcpSocket(sockets, port, from, text(i)));
    await waitUntil(() => begun() >= before + 1, `request ${i + 1} from ${from} to begin`);
  }
  return opened;
}

/** An event stream from `from` on a raw socket: its session's id and secret. */
function sessionFrom(port: number, from: string): Promise<{ session: string; secret: string }> {
  const socket = connect({ port, host: '127.0.0.1', localAddress: from });
  sockets.push(socket);
  socket.setEncoding('utf8');
  return new Promise((resolve, reject) => {
    let received = '';
    socket.on('error', reject);
    socket.on('data', (chunk: string) => {
      received += chunk;
      const match = /event: session\ndata: (.*)\n\n/.exec(received);
      if (match) resolve(JSON.parse(match[1]!) as { session: string; secret: string });
    });
    socket.write('GET /rpc/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  });
}

describe('maxHttpSockets filled by requests whose bodies are still to come', () => {
  it('POSTs to /rpc whose bodies never come, or stop halfway, fill it from four addresses: /livez from another address is served, in place of the oldest of the address holding the most', async () => {
    const PER_ADDRESS = 5;
    const ADDRESSES = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'];
    const { gateway, port, httpUrl } = await res.gateway({
      limits: filledHttpSocketLimits(PER_ADDRESS, ADDRESSES.length, true),
    });
    const head = postHead('/rpc');
    // Every other one sends the first half of its body, then nothing more.
    const text = (i: number) => (i % 2 === 0 ? head : `${head}{"jsonrpc":"2.0",`);
    const held: RawTcpSocket[] = [];
    for (const from of ADDRESSES) {
      held.push(...(await requestsBegun(port, from, PER_ADDRESS, text, () => started)));
    }
    expect(gateSockets(gateway)).toBe(PER_ADDRESS * ADDRESSES.length);

    // A half-sent request from another address: in, in place of 127.0.0.2's oldest.
    const newcomer = await rawTcpSocket(sockets, port, '127.0.0.99', HALF_REQUEST);
    await within(held[0]!.closed, "127.0.0.2's oldest POST to be cut");
    // Cut, not answered: nothing of it was read to answer.
    expect(held[0]!.received()).toBe('');
    expect(closedOnes(held)).toEqual(['127.0.0.2']);

    // 127.0.0.2 holds fewer now: 127.0.0.3 gives up its oldest, one whose body stopped halfway next.
    expect(await getStatusFrom(port, '/livez', '127.0.0.98')).toBe(200);
    await within(held[PER_ADDRESS]!.closed, "127.0.0.3's oldest POST to be cut");
    expect(closedOnes(held)).toEqual(['127.0.0.2', '127.0.0.3']);
    expect(newcomer.isClosed()).toBe(false);

    for (const socket of [...held, newcomer]) socket.socket.destroy();
    await waitUntil(() => gateSockets(gateway) === 0, 'every socket to leave the count');
    const cut = sampleValue(await scrape(httpUrl), 'rpc_http_sockets_closed_total', {
      reason: 'capacity',
    });
    expect(cut).toBe(2);
  });

  it("a session's POSTs waiting unread behind its first, whose body never comes, fill it from two addresses: /livez from another address is served, in place of the oldest of the address holding the most", async () => {
    const PER_ADDRESS = 4;
    const ADDRESSES = ['127.0.0.2', '127.0.0.3'];
    const { gateway, port } = await res.gateway({
      routes: { events: '/rpc/events' },
      limits: filledHttpSocketLimits(PER_ADDRESS, ADDRESSES.length, true),
    });
    const held: RawTcpSocket[] = [];
    for (const from of ADDRESSES) {
      // The stream's socket leaves the bounds once its session opens.
      const { session, secret } = await sessionFrom(port, from);
      const head = postHead(
        '/rpc/events',
        `X-Wsrpc-Session: ${session}\r\nX-Wsrpc-Secret: ${secret}\r\n`,
      );
      held.push(
        ...(await requestsBegun(
          port,
          from,
          PER_ADDRESS,
          () => head,
          () => started,
        )),
      );
    }
    expect(gateSockets(gateway)).toBe(PER_ADDRESS * ADDRESSES.length);

    const newcomer = await rawTcpSocket(sockets, port, '127.0.0.99', HALF_REQUEST);
    await within(held[0]!.closed, "127.0.0.2's oldest POST to be cut");
    expect(closedOnes(held)).toEqual(['127.0.0.2']);
    expect(await getStatusFrom(port, '/livez', '127.0.0.98')).toBe(200);
    await within(held[PER_ADDRESS]!.closed, "127.0.0.3's oldest POST to be cut");
    expect(closedOnes(held)).toEqual(['127.0.0.2', '127.0.0.3']);
    expect(newcomer.isClosed()).toBe(false);
  });

  it('POSTs with Upgrade: h2c, served as HTTP/1.1, whose bodies never come fill it from two addresses: /livez from another address is served, in place of the oldest of the address holding the most', async () => {
    const PER_ADDRESS = 3;
    const ADDRESSES = ['127.0.0.2', '127.0.0.3'];
    // A POST to /rpc is authenticated before its body is read: so its headers are in.
    let authenticated = 0;
    const { gateway, port } = await res.gateway({
      authenticate: () => {
        authenticated++;
        return {};
      },
      limits: filledHttpSocketLimits(PER_ADDRESS, ADDRESSES.length, true),
    });
    const head = postHead(
      '/rpc',
      'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n',
    );
    const held: RawTcpSocket[] = [];
    for (const from of ADDRESSES) {
      held.push(
        ...(await requestsBegun(
          port,
          from,
          PER_ADDRESS,
          () => head,
          () => authenticated,
        )),
      );
    }
    expect(gateSockets(gateway)).toBe(PER_ADDRESS * ADDRESSES.length);

    expect(await getStatusFrom(port, '/livez', '127.0.0.99')).toBe(200);
    await within(held[0]!.closed, "127.0.0.2's oldest POST to be cut");
    expect(closedOnes(held)).toEqual(['127.0.0.2']);
  });
});

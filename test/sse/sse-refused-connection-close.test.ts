/**
 * A request refused before its body is read is answered with `Connection: close` and its
 * connection closed (docs/security-and-limits.md, "Who may connect"), body or not: the event
 * stream's opening GET refused by `authenticate` (401) or for its Origin (403), a request naming
 * no session the gateway has (404), a method the route does not serve (405), and POST /rpc
 * refused with no body. A second request written on the same connection after the answer is
 * never served.
 */
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { UpgradeRejection } from '../../src/index.js';
import { Resources } from '../support/resources.js';

const resources = new Resources();
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await resources.cleanup();
});

/** Where a complete HTTP response ends in `text` (after its headers), or -1 before then. */
function responseEnd(text: string): number {
  const head = text.indexOf('\r\n\r\n');
  if (head < 0) return -1;
  const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, head));
  if (length) {
    const end = head + 4 + Number(length[1]);
    return text.length >= end ? end : -1;
  }
  const last = text.indexOf('\r\n0\r\n\r\n', head);
  return last < 0 ? -1 : last + 7;
}

/**
 * Write `first` on a connection; once its answer has come, write `second` on the same one.
 * Resolves, once the gateway closes it, with the status lines of every answer it sent.
 */
function twoRequests(port: number, first: string, second: string): Promise<string[]> {
  const socket = connect({ port, host: '127.0.0.1' });
  cleanups.push(() => socket.destroy());
  return new Promise((resolve, reject) => {
    let received = '';
    let wroteSecond = false;
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      received += chunk;
      if (!wroteSecond && responseEnd(received) >= 0) {
        wroteSecond = true;
        socket.write(second);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(received.match(/HTTP\/1\.1 \d{3} [^\r]*/g) ?? []));
    socket.write(first);
  });
}

const livez = (port: number): string => `GET /livez HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`;

async function eventsGateway() {
  return resources.gateway({
    routes: { events: '/rpc/events' },
    allowedOrigins: ['http://app.example'],
    authenticate: ({ token }) => {
      if (token !== 'good') throw new UpgradeRejection(401, 'invalid token');
      return 'ann';
    },
  });
}

describe('a refused request closes its connection', () => {
  const CASES: [string, (port: number) => string, string][] = [
    [
      'an opening GET the authenticate hook refuses',
      (port) =>
        `GET /rpc/events HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer bad\r\n\r\n`,
      'HTTP/1.1 401 Unauthorized',
    ],
    [
      'an opening GET from an Origin not allowed',
      (port) =>
        `GET /rpc/events HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nOrigin: http://evil.example\r\n` +
        'Authorization: Bearer good\r\n\r\n',
      'HTTP/1.1 403 Forbidden',
    ],
    [
      'a resume naming no session the gateway has',
      (port) =>
        `GET /rpc/events HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Wsrpc-Session: nope\r\n` +
        'X-Wsrpc-Secret: nope\r\nLast-Event-ID: 0\r\n\r\n',
      'HTTP/1.1 404 Not Found',
    ],
    [
      'a method the event stream does not serve',
      (port) =>
        `PUT /rpc/events HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Wsrpc-Session: nope\r\n` +
        'X-Wsrpc-Secret: nope\r\n\r\n',
      'HTTP/1.1 405 Method Not Allowed',
    ],
    [
      'a POST /rpc without a body the authenticate hook refuses',
      (port) =>
        `POST /rpc HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
        'Content-Length: 0\r\nAuthorization: Bearer bad\r\n\r\n',
      'HTTP/1.1 401 Unauthorized',
    ],
  ];

  it.each(CASES)('%s', async (_name, first, status) => {
    const { port } = await eventsGateway();
    expect(await twoRequests(port, first(port), livez(port))).toEqual([status]);
  });

  it('keeps the connection of an answer that refuses nothing', async () => {
    const { port } = await eventsGateway();
    const statuses = await twoRequests(
      port,
      livez(port),
      `GET /livez HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`,
    );
    expect(statuses).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 200 OK']);
  });
});

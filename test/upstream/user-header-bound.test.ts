// The session's user goes to upstreams as X-Wsrpc-User, percent-encoded. A user the identity
// makes too long for a header (a long JWT claim, whatever an `authenticate` returns) or one with
// no UTF-8 (a lone surrogate) must not reach the upstream as a header it refuses with a status
// (431, an opaque -32011 "status 431"), nor throw in the gateway (-32603): the call is answered
// -32011 naming why, and nothing is sent.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { MAX_USER_HEADER_BYTES } from '../../src/upstream/identity-headers.js';
import { openRawSocket } from '../support/gateway.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

/** Users by the name a connection's `?as=` gives (a query string cannot carry a long one). */
const USERS: Record<string, string> = {
  // 'é' is %C3%A9 in the header: 6 characters.
  fits: 'é'.repeat(Math.floor(MAX_USER_HEADER_BYTES / 6)) + 'x'.repeat(MAX_USER_HEADER_BYTES % 6),
  long:
    'é'.repeat(Math.floor(MAX_USER_HEADER_BYTES / 6)) + 'x'.repeat((MAX_USER_HEADER_BYTES % 6) + 1),
  huge: 'u'.repeat(64 * 1024),
  lone: 'ab\ud800cd',
};

let upstream: Server;
let requests = 0;
let running: RoutedGateway;

beforeAll(async () => {
  // Answers each call with the length of the X-Wsrpc-User header it got.
  upstream = createServer({ maxHeaderSize: 256 * 1024 }, (req, res) => {
    requests++;
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const { id } = JSON.parse(body) as { id: number };
      const user = req.headers['x-wsrpc-user'];
      const result = { userHeaderChars: typeof user === 'string' ? user.length : null };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id, result }));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  running = await startRoutedGateway(
    {
      upstreams: { orders: { url: `http://127.0.0.1:${port}/rpc` } },
      methods: { 'orders.*': 'orders' },
    },
    {
      authenticate: (request) => {
        const user = USERS[request.query.get('as') ?? ''];
        return user === undefined ? undefined : { user, roles: [] };
      },
    },
  );
});

afterAll(async () => {
  await running?.close();
  await new Promise((resolve) => upstream?.close(resolve));
});

async function callAs(
  as: string,
): Promise<{ result?: unknown; error?: { code: number; data?: unknown } }> {
  const raw = await openRawSocket(`${running.url}?as=${as}`);
  try {
    raw.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'orders.get' }));
    const [frame] = await raw.waitFor(1);
    return JSON.parse(frame!) as { result?: unknown; error?: { code: number; data?: unknown } };
  } finally {
    raw.close();
  }
}

describe('X-Wsrpc-User and its bound', () => {
  it('a user whose header is MAX_USER_HEADER_BYTES goes out whole', async () => {
    const reply = await callAs('fits');
    expect(reply.result).toEqual({ userHeaderChars: MAX_USER_HEADER_BYTES });
  });

  it('a user whose header would pass MAX_USER_HEADER_BYTES is answered -32011 naming the bound, nothing sent', async () => {
    for (const as of ['long', 'huge']) {
      const before = requests;
      const reply = await callAs(as);
      expect(reply.error?.code).toBe(ErrorCode.UpstreamUnavailable);
      expect(reply.error?.data).toEqual({
        upstream: 'orders',
        reason: 'user too long for X-Wsrpc-User',
        limit: MAX_USER_HEADER_BYTES,
      });
      expect(requests).toBe(before);
    }
  });

  it('a user that is not well-formed Unicode is answered -32011, nothing sent', async () => {
    const before = requests;
    const reply = await callAs('lone');
    expect(reply.error?.code).toBe(ErrorCode.UpstreamUnavailable);
    expect(reply.error?.data).toEqual({
      upstream: 'orders',
      reason: 'user not well-formed Unicode for X-Wsrpc-User',
    });
    expect(requests).toBe(before);
  });
});

/**
 * NDJSON (TCP, stdio) has no close frame: a connection the gateway closes ends with one last
 * line, the notification `rpc.close` with `{ code, reason }`, so a client tells a refused,
 * revoked or timed-out identity from a dropped connection; `tcpSocket()` and `streamSocket()`
 * report that code and reason in their close event, as a WebSocket reports a close frame's.
 * A connection whose peer ended its side (`echo request | server`) gets its answers only.
 */
import { connect } from 'node:net';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import {
  UpgradeRejection,
  createGateway,
  silentLogger,
  streamSocket,
  tcpSocket,
} from '../../src/index.js';
import type { GatewayOptions } from '../../src/index.js';
import type {
  WebSocketConstructor,
  WebSocketLike,
} from '../../src/transport/websocket-transport.js';
import { waitUntil } from '../support/waiting.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Identity {
  user: string;
}

/** A gateway on TCP whose connections authenticate in-band with `user=<name>` tokens. */
async function tcpGateway(options: GatewayOptions<Identity> = {}) {
  const gateway = createGateway<Identity>({
    logger: silentLogger,
    heartbeatIntervalMs: 0,
    authenticate: ({ token }) => {
      if (!token?.startsWith('user=')) throw new UpgradeRejection(401, 'invalid token');
      return { user: token.slice('user='.length) };
    },
    userOf: (context) => context.user,
    identity: { inBand: true },
    ...options,
  });
  cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
  gateway.method('add', ([a, b]: [number, number]) => a + b);
  const address = await gateway.listenTcp(0, '127.0.0.1');
  return { gateway, port: address.port, url: `tcp://127.0.0.1:${address.port}` };
}

const authenticate = (id: number, token: string): string =>
  `${JSON.stringify({ jsonrpc: '2.0', id, method: 'rpc.authenticate', params: { token } })}\n`;

/** Write `text` on a plain TCP connection (then end it, with `end`) and collect its lines until it closes. */
function rawLines(port: number, text: string, end = false): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => (end ? socket.end(text) : socket.write(text)));
    cleanups.push(() => socket.destroy());
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('error', reject);
    socket.on('close', () =>
      resolve(
        received
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as unknown),
      ),
    );
  });
}

/**
 * Open one of the NDJSON client sockets, write `lines` once it is open, and resolve with its
 * close event and the messages it delivered before it.
 */
function closeOfSocket(
  Socket: WebSocketConstructor,
  url: string,
  lines: string[] = [],
): Promise<{ code: number; reason: string; messages: unknown[] }> {
  const socket = new Socket(url) as WebSocketLike;
  cleanups.push(() => socket.close());
  const messages: unknown[] = [];
  return new Promise((resolve) => {
    socket.onopen = () => {
      for (const line of lines) socket.send(line);
    };
    socket.onmessage = ({ data }) => messages.push(JSON.parse(String(data)));
    socket.onclose = ({ code, reason }) => resolve({ code, reason, messages });
  });
}

describe('the close notice on TCP', () => {
  it('ends a connection closed after its third refusal with rpc.close 4401', async () => {
    const { port } = await tcpGateway();
    const received = await rawLines(port, [1, 2, 3].map((id) => authenticate(id, 'nope')).join(''));
    for (const [index, id] of [1, 2, 3].entries()) {
      expect(received[index]).toMatchObject({ id, error: { code: -32010 } });
    }
    expect(received).toHaveLength(4);
    expect(received[3]).toEqual({
      jsonrpc: '2.0',
      method: 'rpc.close',
      params: { code: 4401, reason: expect.any(String) },
    });
  });

  it('tells tcpSocket() the code and reason of a refusal, a deadline and a revocation', async () => {
    const { gateway, url } = await tcpGateway({
      identity: { inBand: true, inBandDeadlineMs: 100 },
    });
    const refused = await closeOfSocket(
      tcpSocket(),
      url,
      [1, 2, 3].map((id) => authenticate(id, 'nope').trimEnd()),
    );
    expect(refused).toMatchObject({ code: 4401 });
    expect(refused.reason).not.toBe('');
    // The notice is the socket's own: the client is handed the three answers and no more.
    expect(refused.messages).toHaveLength(3);

    const late = await closeOfSocket(tcpSocket(), url);
    expect(late.code).toBe(4408);
    expect(late.messages).toEqual([]);

    const revoked = closeOfSocket(tcpSocket(), url, [authenticate(1, 'user=ann').trimEnd()]);
    await waitUntil(
      () => [...gateway.sessions.values()].some((s) => s.isAuthenticated),
      'ann authenticated',
    );
    await gateway.revokeUser('ann', { reason: 'account closed' });
    expect(await revoked).toMatchObject({ code: 4403, reason: 'account closed' });
  });

  it('is not sent once the peer has ended its side: its answers come, and nothing else', async () => {
    const { port } = await tcpGateway();
    const received = await rawLines(port, authenticate(1, 'user=ann'), true);
    expect(received).toEqual([
      { jsonrpc: '2.0', id: 1, result: expect.objectContaining({ user: 'ann' }) },
    ]);
  });
});

describe('the close notice on stdio', () => {
  it('tells streamSocket() the code and reason the session was closed with', async () => {
    const gateway = createGateway({ logger: silentLogger, heartbeatIntervalMs: 0 });
    cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
    const toGateway = new PassThrough();
    const fromGateway = new PassThrough();
    const served = gateway.serveStream(toGateway, fromGateway);
    const closed = closeOfSocket(streamSocket(fromGateway, toGateway), 'stdio:');
    await waitUntil(() => gateway.sessions.size === 1, 'the session opened');
    [...gateway.sessions.values()][0]!.close(4000, 'enough');
    expect(await closed).toMatchObject({ code: 4000, reason: 'enough' });
    await served;
  });
});

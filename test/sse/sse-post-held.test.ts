/**
 * What one HTTP streaming session's POSTs can make the gateway hold: past the address's byte
 * budget (limits.bytesPerSecondPerIp) a POST waits before its body is read, as a WebSocket past
 * its budget is not read, so a client that writes POSTs faster than the budget (pipelined on one
 * connection here) leaves them in its socket, not in the gateway. Every message is still answered
 * 202 and handled, in the order sent.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import type { SseTransport } from '../../src/transport/sse-transport.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';
import { openStream } from './sse-raw.js';

const running: RunningGateway[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  for (const gateway of running.splice(0)) await gateway.gateway.close({ timeoutMs: 1_000 });
});

const MAX_MESSAGE_BYTES = 256 * 1024;
const POSTS = 24;

it('POSTs written faster than the byte budget wait in the socket, not in the gateway: every one answered in order', async () => {
  const gateway = await startGateway({
    routes: { events: '/rpc/events' },
    heartbeatIntervalMs: 0,
    // 2 MiB/s, bursts of 2 × maxMessageBytes: the third POST waits, and the rest with it.
    limits: {
      maxMessageBytes: MAX_MESSAGE_BYTES,
      bytesPerSecondPerIp: 2 * 1024 * 1024,
      ratePerSecond: 0,
    },
  });
  running.push(gateway);
  const stream = await openStream(`${gateway.httpUrl}/rpc/events`);
  const [session] = [...gateway.gateway.sessions.values()];
  const transport = session!.transport as SseTransport;
  const delivered: number[] = [];
  const receive = transport.receive.bind(transport);
  transport.receive = (text: string) => {
    delivered.push((JSON.parse(text) as { id: number }).id);
    receive(text);
  };

  // The POSTs' connection, seen from the gateway: what it has read of it.
  const accepted = new Promise<Socket>((resolve) =>
    gateway.gateway.httpServer.once('connection', resolve),
  );
  const client = connect(gateway.port, '127.0.0.1');
  sockets.push(client);
  client.on('error', () => undefined);
  let answers = '';
  client.setEncoding('latin1').on('data', (chunk: string) => (answers += chunk));
  await new Promise((resolve) => client.once('connect', resolve));
  const server = await accepted;

  const pad = 'x'.repeat(MAX_MESSAGE_BYTES - 100);
  const request = (id: number): string => {
    const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'rpc.ping', params: [pad] });
    return (
      `POST /rpc/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
      `X-Wsrpc-Session: ${stream.session.session}\r\nX-Wsrpc-Secret: ${stream.session.secret}\r\n` +
      `Content-Length: ${body.length}\r\n\r\n${body}`
    );
  };
  const requests = Array.from({ length: POSTS }, (_, i) => request(i + 1));
  // Read by the gateway and not handed to the session yet: the bytes it holds of them.
  let most = 0;
  const look = (): void => {
    const handed = requests.slice(0, delivered.length).reduce((sum, r) => sum + r.length, 0);
    most = Math.max(most, server.bytesRead - handed);
  };
  const looking = setInterval(look, 2);
  try {
    client.write(requests.join(''));
    await waitUntil(() => delivered.length === POSTS, 'every POST handed over', 30_000);
    look();
  } finally {
    clearInterval(looking);
  }

  expect(delivered).toEqual(Array.from({ length: POSTS }, (_, i) => i + 1));
  await waitUntil(() => answers.split('HTTP/1.1 202').length - 1 === POSTS, 'every 202');
  // One POST's body being read, and what Node reads ahead of it (64 KiB reads, 16 KiB kept).
  expect(most).toBeLessThanOrEqual(MAX_MESSAGE_BYTES + 256 * 1024);
  stream.destroy();
}, 60_000);

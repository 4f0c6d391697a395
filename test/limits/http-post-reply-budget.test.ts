/**
 * limits.maxBufferedBytesTotal counts POST /rpc replies written and not yet taken by their
 * clients: a client that sends calls with large results on many sockets and never reads made
 * the node hold every reply for as long as it kept the sockets open. Past the budget the sockets
 * holding the most are destroyed, largest first, until the total is back within it (logged); a
 * client that reads gets its reply.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { captureLogger, logged } from '../support/logging.js';
import { waitUntil } from '../support/waiting.js';

const running: RunningGateway[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  for (const gateway of running.splice(0)) await gateway.gateway.close({ timeoutMs: 1_000 });
});

const MiB = 1024 * 1024;
const BUDGET = 8 * MiB;
/** Larger than what the kernel's buffers on loopback take in, so the node holds most of it. */
const RESULT = 24 * MiB;
const POSTS = 5;

/** POST `body` to /rpc on POSTS sockets of their own, each sent and never read. */
async function postUnread(port: number, body: string): Promise<void> {
  for (let i = 0; i < POSTS; i++) {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    sockets.push(socket);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    // The reply waits in the gateway's socket.
    socket.pause();
    socket.write(
      `POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    );
  }
}

it('POST /rpc replies not read count toward maxBufferedBytesTotal: past it their sockets are destroyed, largest first', async () => {
  const { logger, records } = captureLogger();
  const gateway = await startGateway({
    logger,
    limits: { maxBufferedBytesTotal: BUDGET, bytesPerSecondPerIp: 0, ratePerSecond: 0 },
  });
  running.push(gateway);
  let asked = 0;
  gateway.gateway.method('big', () => {
    asked++;
    return 'y'.repeat(RESULT);
  });
  gateway.gateway.method('small', () => 'ok');
  const serverSockets: Socket[] = [];
  gateway.gateway.httpServer.on('connection', (socket: Socket) => serverSockets.push(socket));
  const { port } = new URL(gateway.httpUrl);
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'big' });
  await postUnread(Number(port), body);
  await waitUntil(() => asked === POSTS, 'every call to run');
  // What the node holds of the replies (Node's buffers of the sockets still open) comes back
  // within the budget, the sockets holding the most destroyed: a reply left would hold 24 MiB.
  const held = () =>
    serverSockets.filter((s) => !s.destroyed).reduce((total, s) => total + s.writableLength, 0);
  await waitUntil(() => held() <= BUDGET, 'the replies held to come within the budget');
  const shed = logged(
    records,
    'closing a POST whose reply is not read: bytes held on this node are over their budget',
  );
  expect(shed.length).toBeGreaterThanOrEqual(1);
  expect(serverSockets.filter((s) => s.destroyed).length).toBeGreaterThanOrEqual(shed.length);
  // A client that reads is answered.
  const response = await fetch(`${gateway.httpUrl}/rpc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'small' }),
  });
  expect(await response.json()).toEqual({ jsonrpc: '2.0', id: 2, result: 'ok' });
}, 60_000);

it('a batch’s chunked reply not read: no more of it is made than its client takes, and the node holds it within the budget', async () => {
  const gateway = await startGateway({
    limits: { maxBufferedBytesTotal: BUDGET, bytesPerSecondPerIp: 0, ratePerSecond: 0 },
  });
  running.push(gateway);
  const CALLS = 24;
  let asked = 0;
  let made = 0;
  gateway.gateway.method('big', () => {
    asked++;
    return {
      toJSON() {
        made++;
        return 'y'.repeat(MiB);
      },
    };
  });
  const serverSockets: Socket[] = [];
  gateway.gateway.httpServer.on('connection', (socket: Socket) => serverSockets.push(socket));
  const { port } = new URL(gateway.httpUrl);
  const body = JSON.stringify(
    Array.from({ length: CALLS }, (_, id) => ({ jsonrpc: '2.0', id, method: 'big' })),
  );
  await postUnread(Number(port), body);
  await waitUntil(() => asked === POSTS * CALLS, 'every call to run');
  // Until nothing more is made for a while (a hundred turns of the event loop).
  for (let still = 0; still < 100;) {
    const before = made;
    await new Promise((resolve) => setImmediate(resolve));
    still = made === before ? still + 1 : 0;
  }
  expect(made).toBeLessThan(POSTS * CALLS);
  const held = serverSockets
    .filter((s) => !s.destroyed)
    .reduce((total, s) => total + s.writableLength, 0);
  expect(held).toBeLessThanOrEqual(BUDGET);
}, 60_000);

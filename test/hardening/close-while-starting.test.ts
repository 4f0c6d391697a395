/**
 * Closing a gateway whatever it is doing: close() while listen() is under way leaves nothing
 * listening (listen rejects), drain() called again during a drain tells each client once, and a
 * gateway that made its own server closes within its timeoutMs while another gateway attached
 * to that server still holds a session (that gateway's to close).
 */
import { afterEach, expect, it } from 'vitest';
import { createGateway } from '../../src/server/gateway.js';
import type { Gateway } from '../../src/server/gateway.js';
import { silentLogger } from '../../src/peer/logger.js';
import { Resources } from '../support/resources.js';
import { openRaw } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
const made: Gateway[] = [];
afterEach(async () => {
  for (const gateway of made.splice(0)) await gateway.close({ timeoutMs: 500 });
  await res.cleanup();
});

function gateway(options: Parameters<typeof createGateway>[0] = {}): Gateway {
  const made1 = createGateway({ logger: silentLogger, heartbeatIntervalMs: 0, ...options });
  made.push(made1);
  return made1;
}

it('close() while listen() is under way: listen rejects and nothing is left listening', async () => {
  const gw = gateway();
  const listening = gw.listen(0, '127.0.0.1');
  const settled = listening.then(
    () => 'listening',
    (err: Error) => err.message,
  );
  await gw.close();
  expect(await settled).toBe('The gateway is closing: it does not listen');
  expect(gw.httpServer.listening).toBe(false);
});

it('drain() called again during a drain sends each client one notice, and both calls settle', async () => {
  const { url, gateway: gw } = await res.gateway();
  const raw = await openRaw(res, url);
  const first = gw.drain({ deadlineMs: 300 });
  const second = gw.drain({ deadlineMs: 300 });
  await Promise.all([first, second]);
  expect((await raw.closed).code).toBe(1012);
  expect(raw.frames.filter((f) => f.method === 'rpc.reconnect')).toHaveLength(1);
});

it("a gateway's own server closes within timeoutMs while another gateway on it holds a session", async () => {
  const a = await res.gateway();
  const b = gateway({
    server: a.gateway.httpServer,
    path: '/b',
    routes: { livez: false, readyz: false, metrics: false, openrpc: false },
  });
  const raw = await openRaw(res, `ws://127.0.0.1:${a.port}/b`);
  await waitUntil(() => b.sessions.size === 1, "b's session");
  const closed = a.gateway.close({ timeoutMs: 200 }).then(() => 'closed');
  // Far past the timeout: without it, a's close waits for b's socket for as long as b keeps it.
  const outcome = await Promise.race([
    closed,
    new Promise((resolve) => setTimeout(() => resolve('still closing'), 10_000)),
  ]);
  expect(outcome).toBe('closed');
  expect(a.gateway.httpServer.listening).toBe(false);
  expect(raw.socket.readyState).toBe(raw.socket.OPEN);
});

/**
 * A listening server's own error event (an accept that failed: out of file descriptors past
 * libuv's reserve, out of memory) is logged, on the HTTP port and on a TCP port. With nobody
 * listening for it, the event would throw and end the process.
 */
import { afterEach, expect, it } from 'vitest';
import type { Server } from 'node:net';
import { captureLogger, logged } from '../support/logging.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

it('an error event of the listening HTTP and TCP servers is logged, not thrown', async () => {
  const { logger, records } = captureLogger();
  const { gateway } = await res.gateway({ logger, heartbeatIntervalMs: 0 });
  await gateway.listenTcp(0, '127.0.0.1');
  const accept = Object.assign(new Error('accept ENFILE'), { code: 'ENFILE' });
  expect(() => gateway.httpServer.emit('error', accept)).not.toThrow();
  expect(logged(records, 'http server error')).toHaveLength(1);
  // The TCP listener is the intake's own; reached through the server it made.
  const tcp = (gateway as unknown as { intake: { tcpServers: Set<Server> } }).intake.tcpServers;
  expect(tcp.size).toBe(1);
  for (const server of tcp) expect(() => server.emit('error', accept)).not.toThrow();
  expect(logged(records, 'tcp server error')).toHaveLength(1);
});

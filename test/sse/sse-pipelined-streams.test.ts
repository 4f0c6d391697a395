/**
 * Event-stream GETs pipelined on one keep-alive connection: the second one's response is queued
 * behind the first (which never ends) and has no socket of its own. When the connection dies,
 * both sessions lose their stream and close after sseGraceMs, so they give back their
 * connection slots (maxConnectionsPerIp) to the address.
 */
import { connect } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { startGateway } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const GET = 'GET /rpc/events HTTP/1.1\r\nHost: x\r\n\r\n';

/** The status line of a lone event-stream GET from this address. */
async function openingStatus(port: number): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  cleanups.push(() => socket.destroy());
  let answer = '';
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
  socket.write(GET);
  await waitUntil(() => answer.includes('\r\n'), 'the status line');
  return answer.slice(0, answer.indexOf('\r\n'));
}

it('sessions opened by pipelined event-stream GETs close once their connection is gone', async () => {
  const { gateway, port } = await startGateway({
    routes: { events: '/rpc/events' },
    limits: { sseGraceMs: 200, maxConnectionsPerIp: 3 },
  });
  cleanups.push(() => gateway.close({ timeoutMs: 500 }));
  for (let round = 0; round < 3; round++) {
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.resume();
    socket.write(GET + GET);
    await waitUntil(() => gateway.sessions.size === 2, 'both sessions');
    socket.destroy();
    await waitUntil(() => gateway.sessions.size === 0, 'both sessions to close after sseGraceMs');
  }
  // Every slot of the address is free again.
  for (let i = 0; i < 3; i++) expect(await openingStatus(port)).toBe('HTTP/1.1 200 OK');
  expect(await openingStatus(port)).toBe('HTTP/1.1 429 Too Many Requests');
});

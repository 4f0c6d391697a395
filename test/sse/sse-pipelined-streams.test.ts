/**
 * Event-stream GETs pipelined on one keep-alive connection: the first is a stream, and a GET
 * behind it (its response queued, with no socket of its own) is refused before any session is
 * made, so pipelined GETs make one session however many there are. When the connection dies,
 * that session loses its stream and closes after sseGraceMs, giving back its connection slot
 * (maxConnectionsPerIp) to the address.
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
const CALL = '{"jsonrpc":"2.0","method":"mark","id":1}';
const MARK = `POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${CALL.length}\r\n\r\n${CALL}`;

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

it('pipelined event-stream GETs make one session, which closes once its connection is gone', async () => {
  const { gateway, port } = await startGateway({
    routes: { events: '/rpc/events' },
    limits: { sseGraceMs: 200, maxConnectionsPerIp: 3 },
  });
  cleanups.push(() => gateway.close({ timeoutMs: 500 }));
  let marks = 0;
  gateway.method('mark', () => ++marks);
  const warnings: Error[] = [];
  const onWarning = (warning: Error): void => void warnings.push(warning);
  process.on('warning', onWarning);
  cleanups.push(() => process.off('warning', onWarning));
  for (let round = 0; round < 3; round++) {
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.resume();
    // Twelve GETs, then a call whose handler runs once the twelve have been read.
    socket.write(GET.repeat(12) + MARK);
    await waitUntil(() => marks === round + 1, 'the call after the twelve GETs');
    // Answered in turn behind the stream, none of the other eleven made a session.
    expect(gateway.sessions.size).toBe(1);
    socket.destroy();
    await waitUntil(() => gateway.sessions.size === 0, 'the session to close after sseGraceMs');
  }
  expect(warnings).toEqual([]);
  // Every slot of the address is free again.
  for (let i = 0; i < 3; i++) expect(await openingStatus(port)).toBe('HTTP/1.1 200 OK');
  expect(await openingStatus(port)).toBe('HTTP/1.1 429 Too Many Requests');
});

/**
 * limits.maxBufferedBytesTotal counts a TCP line still being received: each connection may hold
 * up to maxMessageBytes of a line whose newline has not come, and many connections each holding
 * one could together hold far more than the budget. Past it the connections holding the most
 * are closed with 1013, largest first, as for queued output; what is left is within the budget.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import type { Session } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { waitUntil, within } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const KiB = 1024;
const BUDGET = 2 * 1024 * KiB;
/** Each connection's unfinished line: three of them are over the budget, two are not. */
const PART = 768 * KiB;
const CONNECTIONS = 4;

/** What the server holds of the session's unfinished line (its framing's count). */
function heldOf(session: Session): number {
  return (session.transport as unknown as { lines: { heldBytes: number } }).lines.heldBytes;
}

it('unfinished TCP lines count toward maxBufferedBytesTotal: past it the largest are closed 1013', async () => {
  const { gateway } = await res.gateway({
    heartbeatIntervalMs: 0,
    // Only the total is measured here: no input budget pauses the lines.
    limits: { maxBufferedBytesTotal: BUDGET, bytesPerSecond: 0, bytesPerSecondPerIp: 0 },
  });
  gateway.method('length', (params) => (params as [string])[0].length);
  const { port } = await gateway.listenTcp(0, '127.0.0.1');
  const sockets: Socket[] = [];
  for (let i = 0; i < CONNECTIONS; i++) {
    const socket = connect(port, '127.0.0.1');
    res.netSockets.push(socket);
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('connect', resolve));
    sockets.push(socket);
  }
  await waitUntil(() => gateway.sessions.size === CONNECTIONS, 'the sessions');
  const sessions = [...gateway.sessions.values()];

  // A JSON text with no newline: a line the server holds until its end comes.
  const part = `{"jsonrpc":"2.0","id":1,"method":"length","params":["${'x'.repeat(PART - 64)}`;
  for (const socket of sockets) socket.write(part);
  // Every byte arrived (or its connection was closed): then a turn for the budget's check.
  await waitUntil(
    () => sessions.every((s) => s.isClosed || heldOf(s) === Buffer.byteLength(part)),
    'the unfinished lines to arrive',
  );
  await new Promise((resolve) => setImmediate(resolve));

  const closed = sessions.filter((s) => s.isClosed);
  expect(closed.length).toBeGreaterThan(0);
  for (const session of closed) {
    expect(await within(session.closed, 'the close')).toMatchObject({ code: 1013 });
  }
  const open = sessions.filter((s) => !s.isClosed);
  const held = open.reduce((sum, s) => sum + heldOf(s), 0);
  expect(held).toBeLessThanOrEqual(BUDGET);
  // The connections left are served: their line ends, and is answered.
  const [kept] = open;
  expect(kept).toBeDefined();
  const socket = sockets[sessions.indexOf(kept!)]!;
  let text = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  socket.write('"]}\n');
  await waitUntil(() => text.includes('\n'), 'the answer');
  expect(JSON.parse(text)).toMatchObject({ id: 1, result: PART - 64 });
});

/**
 * A drain and a TCP (newline-delimited JSON) session whose client reads slowly: the session is
 * closed once its output has left the gateway, not while a large reply to a call that was in
 * flight is still queued (closed then, a slow reader loses the end of a reply to a call that
 * ran). What was sent before the drain's ping has been read once the ping is answered.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { deferred } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

it('a large reply to a call in flight, to a client reading slowly, is sent whole before the drain closes the session', async () => {
  const { gateway } = await res.gateway();
  const size = 8 * 1024 * 1024;
  const gate = deferred();
  gateway.method('big', async () => {
    await gate.promise;
    return 'x'.repeat(size);
  });
  const { port } = await gateway.listenTcp(0, '127.0.0.1');
  const socket: Socket = connect(port, '127.0.0.1');
  res.netSockets.push(socket);
  await new Promise((resolve) => socket.once('connect', resolve));
  await waitUntil(() => gateway.sessions.size === 1, 'the session');
  const session = [...gateway.sessions.values()][0]!;
  const chunks: Buffer[] = [];
  let pinged = false;
  const ended = new Promise((resolve) => socket.once('end', resolve));
  socket.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    // Answer the drain's ping, as a client of the protocol does.
    const ping = /"method":"rpc\.ping","id":(\d+)/.exec(chunk.toString('utf8'));
    if (ping) {
      socket.write(`{"jsonrpc":"2.0","result":"pong","id":${ping[1]}}\n`);
      pinged = true;
    }
  });
  socket.write('{"jsonrpc":"2.0","id":1,"method":"big"}\n');
  await waitUntil(() => session.peer.inFlightCount === 1, 'the call to start');
  const draining = gateway.drain({ deadlineMs: 15_000 });
  await waitUntil(() => pinged, 'the ping answered');
  // From here the client reads slowly (not at all, for now); the call ends with a large reply.
  socket.pause();
  gate.resolve();
  await waitUntil(() => session.transport.bufferedAmount > 0, 'the reply queued');
  // Several of the drain's looks at the session (every 10 ms) pass while the reply is queued.
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(session.isClosed).toBe(false);
  socket.resume();
  await ended;
  await draining;
  const lines = Buffer.concat(chunks).toString('utf8').split('\n');
  const reply = lines.find((line) => line.startsWith('{"jsonrpc":"2.0","result"'))!;
  expect((JSON.parse(reply) as { result: string }).result).toHaveLength(size);
});

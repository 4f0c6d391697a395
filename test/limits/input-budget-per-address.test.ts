/**
 * limits.bytesPerSecondPerIp: the WebSocket connections of one address group read out of one
 * byte budget as well as each out of its own, so many connections from an address get no more
 * than the address's budget. A connection past it has its socket paused, not refused: every
 * message is answered, in order. Connections from another address read on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { resolveLimits } from '../../src/server/options.js';
import type { Session } from '../../src/server/session.js';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import type { WireFrame } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { openSocket } from '../support/sockets.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const MAX_MESSAGE_BYTES = 16 * 1024;
/** The burst is 2 × maxMessageBytes: 32 KiB. */
const BYTES_PER_SECOND_PER_IP = 256 * 1024;
/** 20 × 8 KiB = 160 KiB per connection: five times the burst, within the connection's own. */
const MESSAGES = 20;
const PAD = 'x'.repeat(8 * 1024);

/** Count a session's socket pauses for its input budget, and resumes made while it held. */
function watchPauses(session: Session) {
  const transport = session.transport as WsTransport;
  const socket = transport.socket;
  const seen = { pauses: 0, byOutput: 0, resumedEarly: 0 };
  const pause = socket.pause.bind(socket);
  socket.pause = () => {
    seen.pauses++;
    if (transport.readingPaused) seen.byOutput++;
    pause();
  };
  const resume = socket.resume.bind(socket);
  socket.resume = () => {
    if (transport.readingPaused || transport.inputPaused) seen.resumedEarly++;
    resume();
  };
  return seen;
}

/** A connection from `localAddress`, with the gateway's session for it and its pauses. */
async function connectFrom(running: Awaited<ReturnType<typeof budgetGateway>>, from: string) {
  const before = sessionIds(running.gateway);
  const socket: WebSocket = await openSocket(res, running.url, undefined, { localAddress: from });
  const frames: WireFrame[] = [];
  socket.on('message', (data) =>
    frames.push(JSON.parse((data as Buffer).toString('utf8')) as WireFrame),
  );
  await waitUntil(() => running.gateway.sessions.size > before.size, 'the session');
  const pauses = watchPauses(newSession(running.gateway, before));
  return { socket, frames, pauses };
}

async function budgetGateway(
  bytesPerSecond: number,
  bytesPerSecondPerIp = BYTES_PER_SECOND_PER_IP,
) {
  const running = await res.gateway({
    limits: { maxMessageBytes: MAX_MESSAGE_BYTES, bytesPerSecond, bytesPerSecondPerIp },
  });
  running.gateway.method('echo', (params) => (params as [number, string])[0]);
  return running;
}

function flood(socket: WebSocket, messages = MESSAGES): void {
  for (let i = 1; i <= messages; i++) {
    socket.send(JSON.stringify({ jsonrpc: '2.0', id: i, method: 'echo', params: [i, PAD] }));
  }
}

const inOrder = Array.from({ length: MESSAGES }, (_, i) => i + 1);

describe('limits.bytesPerSecondPerIp (WebSocket)', () => {
  it('pauses connections of one address past their shared budget, answers all in order, and leaves another address reading', async () => {
    // The connection's own budget (1 MiB/s, burst 32 KiB) is left as it is: the address's
    // budget binds once two connections read at once.
    const running = await budgetGateway(1024 * 1024 * 1024);
    const a = await connectFrom(running, '127.0.0.2');
    const b = await connectFrom(running, '127.0.0.2');
    const other = await connectFrom(running, '127.0.0.3');

    flood(a.socket);
    flood(b.socket);
    await waitUntil(() => a.pauses.pauses + b.pauses.pauses > 0, 'a connection to be paused');
    // Served while the address's connections are held back.
    other.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 'o', method: 'echo', params: [0, ''] }));
    await waitUntil(() => other.frames.length === 1, 'the other address’s answer');
    expect(other.frames[0]!.result).toBe(0);

    await waitUntil(
      () => a.frames.length === MESSAGES && b.frames.length === MESSAGES,
      'every reply',
      30_000,
    );
    for (const { frames, pauses } of [a, b]) {
      expect(frames.map((frame) => frame.result)).toEqual(inOrder);
      expect(pauses.byOutput).toBe(0); // paused for input, not for unread output
      expect(pauses.resumedEarly).toBe(0);
    }
    expect(other.pauses.pauses).toBe(0);
  }, 40_000);

  it('pauses a lone connection the address’s budget binds, its own being off', async () => {
    const running = await budgetGateway(0);
    const a = await connectFrom(running, '127.0.0.4');
    flood(a.socket);
    await waitUntil(() => a.frames.length === MESSAGES, 'every reply', 30_000);
    expect(a.frames.map((frame) => frame.result)).toEqual(inOrder);
    expect(a.pauses.pauses).toBeGreaterThan(0);
    expect(a.pauses.resumedEarly).toBe(0);
  }, 40_000);

  it('leaves a connection what the others of its address have not read', async () => {
    // 4 KiB/s: what `a` reads (3 × 8 KiB, within the 32 KiB burst) is not paid back for seconds.
    const running = await budgetGateway(1024 * 1024 * 1024, 4 * 1024);
    const a = await connectFrom(running, '127.0.0.5');
    const b = await connectFrom(running, '127.0.0.5');
    flood(a.socket, 3);
    await waitUntil(() => a.frames.length === 3, 'the first connection’s replies');
    expect(a.pauses.pauses).toBe(0);
    // 2 × 8 KiB more from the address: past its burst, though within `b`'s own.
    flood(b.socket, 2);
    await waitUntil(() => b.frames.length === 2, 'the second connection’s replies', 30_000);
    expect(b.frames.map((frame) => frame.result)).toEqual([1, 2]);
    expect(b.pauses.pauses).toBeGreaterThan(0);
    expect(b.pauses.resumedEarly).toBe(0);
  }, 40_000);

  it('is an option of its own, 0 to turn it off', () => {
    expect(resolveLimits({}).bytesPerSecondPerIp).toBe(8 * 1024 * 1024);
    expect(resolveLimits({ bytesPerSecondPerIp: 0 }).bytesPerSecondPerIp).toBe(0);
    expect(() => resolveLimits({ bytesPerSecondPerIp: -1 })).toThrow(
      'limits.bytesPerSecondPerIp must be a number at least 0, not -1',
    );
  });
});

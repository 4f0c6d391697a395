/**
 * limits.bytesPerSecond: a WebSocket connection that sends more bytes than its budget has its
 * socket paused until the budget refills. Nothing it sent is lost or refused: every message is
 * answered, in order. Other connections read on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { resolveLimits } from '../../src/server/options.js';
import type { Session } from '../../src/server/session.js';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { Resources } from '../support/resources.js';
import { openRaw } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const MAX_MESSAGE_BYTES = 16 * 1024;
/** The burst is 2 × maxMessageBytes: 32 KiB. */
const BYTES_PER_SECOND = 256 * 1024;
const MESSAGES = 60;
const PAD = 'x'.repeat(8 * 1024);

/**
 * Count the server socket's pauses, whether each came with the output buffer's pause, and the
 * resumes made while either pause still held (there must be none).
 */
function watchPauses(session: Session) {
  const transport = session.transport as WsTransport;
  const socket = transport.socket;
  const seen = { pauses: 0, byOutput: 0, resumes: 0, resumedEarly: 0 };
  const pause = socket.pause.bind(socket);
  socket.pause = () => {
    seen.pauses++;
    if (transport.readingPaused) seen.byOutput++;
    pause();
  };
  const resume = socket.resume.bind(socket);
  socket.resume = () => {
    seen.resumes++;
    if (transport.readingPaused || transport.inputPaused) seen.resumedEarly++;
    resume();
  };
  return seen;
}

async function budgetGateway() {
  const running = await res.gateway({
    // The connections share an address: its budget (input-budget-per-address.test.ts) is off,
    // or the flood's debt there would hold the other connection back too.
    limits: {
      maxMessageBytes: MAX_MESSAGE_BYTES,
      bytesPerSecond: BYTES_PER_SECOND,
      bytesPerSecondPerIp: 0,
    },
  });
  running.gateway.method('echo', (params) => (params as [number, string])[0]);
  return running;
}

describe('limits.bytesPerSecond (WebSocket)', () => {
  it('pauses a connection past its budget, answers all it sent in order, and leaves the others reading', async () => {
    const { gateway, url } = await budgetGateway();
    let before = sessionIds(gateway);
    const flooder = await openRaw(res, url);
    const flooding = watchPauses(newSession(gateway, before));
    before = sessionIds(gateway);
    const other = await openRaw(res, url);
    const otherPauses = watchPauses(newSession(gateway, before));

    // 480 KiB at once: 15 times the burst.
    for (let i = 1; i <= MESSAGES; i++) {
      flooder.send({ jsonrpc: '2.0', id: i, method: 'echo', params: [i, PAD] });
    }
    await waitUntil(() => flooding.pauses > 0, 'the flooding connection to be paused');
    // Served while the other is held back.
    expect((await other.request('echo', [0, 'small'])).result).toBe(0);

    await flooder.until(() => flooder.frames.length === MESSAGES, 'every reply', 30_000);
    expect(flooder.frames.map((frame) => frame.result)).toEqual(
      Array.from({ length: MESSAGES }, (_, i) => i + 1),
    );
    expect(flooder.frames.every((frame) => frame.error === undefined)).toBe(true);
    expect(flooding.byOutput).toBe(0); // paused for its input, not for unread output
    expect(flooding.resumes).toBeGreaterThan(0);
    expect(flooding.resumedEarly).toBe(0);
    expect(otherPauses.pauses).toBe(0);
    // Reading resumed: the connection still answers.
    flooder.send({ jsonrpc: '2.0', id: 'after', method: 'echo', params: [99, ''] });
    expect((await flooder.response('after')).result).toBe(99);
  }, 40_000);

  it('lets a message of maxMessageBytes through without a pause', async () => {
    const { gateway, url } = await budgetGateway();
    const before = sessionIds(gateway);
    const raw = await openRaw(res, url);
    const pauses = watchPauses(newSession(gateway, before));
    const base = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'echo', params: [1, ''] });
    const full = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'echo',
      params: [1, 'x'.repeat(MAX_MESSAGE_BYTES - base.length)],
    });
    expect(Buffer.byteLength(full)).toBe(MAX_MESSAGE_BYTES);
    raw.send(full);
    expect((await raw.response(1)).result).toBe(1);
    expect(pauses.pauses).toBe(0);
  });

  it('is an option of its own, 0 to turn it off', () => {
    expect(resolveLimits({}).bytesPerSecond).toBe(1024 * 1024);
    expect(resolveLimits({ bytesPerSecond: 0 }).bytesPerSecond).toBe(0);
    expect(() => resolveLimits({ bytesPerSecond: -1 })).toThrow(
      'limits.bytesPerSecond must be a number at least 0, not -1',
    );
  });
});

/**
 * The node-wide budget for queued output (limits.maxBufferedBytesTotal): each connection may
 * queue up to maxBufferedBytes, and many that do not read could together hold far more than
 * the process has. Past the budget the connections holding the most are closed with 1013,
 * largest first, until the total is back within it; the others, readers or not, are kept.
 */
import { connect as netConnect } from 'node:net';
import type { Socket } from 'node:net';
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import type { Gateway, Session } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { waitUntil, within } from '../support/waiting.js';
import { openRaw, openSocket } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

const MiB = 1024 * 1024;
const BUDGET = 2 * MiB;
const CHUNK = 'x'.repeat(64 * 1024);
/** A guard against a loop that would never end, not a measure of anything. */
const MAX_PUSHES = 4_000;

/** One 64 KiB notification for `session`, then a turn (the budget is checked at a turn's end). */
async function push(session: Session): Promise<void> {
  session.notify('fill', [CHUNK]);
  await new Promise((resolve) => setImmediate(resolve));
}

/** The next session `gateway` opens, once `open()` has connected it. */
async function sessionOf(gateway: Gateway, open: () => Promise<unknown>): Promise<Session> {
  const opened = firstValueFrom(gateway.connected$);
  await open();
  return opened;
}

describe('maxBufferedBytesTotal: a budget for output queued on the whole node', () => {
  it('over the budget, the connection with the most queued is closed with 1013; the others stay', async () => {
    const { url, gateway } = await res.demoGateway({
      // Per connection 4 MiB (the default) is more than the whole budget here.
      limits: { maxBufferedBytesTotal: BUDGET },
    });
    const { port } = await gateway.listenTcp(0, '127.0.0.1');

    // A: a TCP client that reads nothing.
    let tcp: Socket | undefined;
    const a = await sessionOf(gateway, async () => {
      tcp = netConnect(port, '127.0.0.1');
      res.netSockets.push(tcp);
      tcp.on('error', () => undefined);
      tcp.pause();
      await new Promise((resolve) => tcp!.once('connect', resolve));
    });
    // B: a WebSocket client that reads nothing after its handshake.
    const b = await sessionOf(gateway, async () => {
      const socket = await openSocket(res, url);
      socket.on('error', () => undefined);
      (socket as unknown as { _socket: Socket })._socket.pause();
    });
    // C: a client that reads.
    const reader = await openRaw(res, url);
    expect(gateway.sessions.size).toBe(3);

    // A's queue to 1.5 MiB (once the kernel's buffers are full): within the budget alone.
    for (let pushes = 0; a.bufferedAmount < 1.5 * MiB; pushes++) {
      if (pushes > MAX_PUSHES) throw new Error('A’s output never queued up');
      await push(a);
    }
    expect(a.isClosed).toBe(false);
    // Then B's, until the two together pass the budget: A, holding the most, is closed.
    for (let pushes = 0; !a.isClosed; pushes++) {
      if (pushes > MAX_PUSHES) throw new Error('nothing was closed');
      if (b.bufferedAmount > BUDGET) throw new Error('B alone went over the budget');
      await push(b);
    }
    expect(await within(a.closed, 'A to close')).toEqual({
      code: 1013,
      reason: 'output over budget',
    });
    // B, holding less, stays: what is left is within the budget.
    expect(b.isClosed).toBe(false);
    expect(b.bufferedAmount).toBeLessThanOrEqual(BUDGET);
    expect(await reader.request('sum', [1, 2])).toMatchObject({ result: 3 });
    await waitUntil(() => gateway.sessions.size === 2, 'A to be gone');
    expect(gateway.sessions.has(b.id)).toBe(true);
  });

  it('0 turns the budget off', async () => {
    const { url, gateway } = await res.demoGateway({ limits: { maxBufferedBytesTotal: 0 } });
    const b = await sessionOf(gateway, async () => {
      const socket = await openSocket(res, url);
      socket.on('error', () => undefined);
      (socket as unknown as { _socket: Socket })._socket.pause();
    });
    for (let pushes = 0; b.bufferedAmount <= BUDGET; pushes++) {
      if (pushes > MAX_PUSHES) throw new Error('the output never queued up');
      await push(b);
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(b.isClosed).toBe(false);
  });
});

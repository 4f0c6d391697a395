/**
 * A connection paused for its input budget (limits.bytesPerSecond, or its address's
 * bytesPerSecondPerIp) does not read the pongs its peer sends meanwhile: they wait behind the
 * messages it has not read yet. The heartbeat must not take that for a dead peer: the
 * connection stays across heartbeat visits made while it is paused, and every message is
 * answered, in order.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { GatewayLimits } from '../../src/server/options.js';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { Resources } from '../support/resources.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

const MAX_MESSAGE_BYTES = 1024;
/** The burst is 2 × maxMessageBytes: 2 KiB; 16 × ~900 bytes is about six times that. */
const BUDGET = 4 * 1024;
const MESSAGES = 16;
const PAD = 'x'.repeat(800);

describe('the heartbeat and the input budget', () => {
  it.each<[string, GatewayLimits]>([
    ['its own budget', { bytesPerSecond: BUDGET, bytesPerSecondPerIp: 0 }],
    ['its address’s budget', { bytesPerSecond: 0, bytesPerSecondPerIp: BUDGET }],
  ])(
    'keeps a connection paused for %s across heartbeat visits, and answers all it sent in order',
    async (_, limits) => {
      const { gateway, url } = await res.gateway({
        // The shortest heartbeat: one slice, every connection visited every 100 ms.
        heartbeatIntervalMs: 100,
        limits: { maxMessageBytes: MAX_MESSAGE_BYTES, ...limits },
      });
      gateway.method('echo', (params) => (params as [number, string])[0]);
      const before = sessionIds(gateway);
      const raw = await openRaw(res, url);
      const transport = newSession(gateway, before).transport as WsTransport;
      // Each heartbeat visit that finds the connection alive pings it: count those made while
      // reading is paused for the budget.
      let pingsWhilePaused = 0;
      const ping = transport.ping.bind(transport);
      transport.ping = (payload) => {
        if (transport.inputPaused) pingsWhilePaused++;
        ping(payload);
      };

      for (let i = 1; i <= MESSAGES; i++) {
        raw.send({ jsonrpc: '2.0', id: i, method: 'echo', params: [i, PAD] });
      }
      await raw.until(
        () => raw.socket.readyState !== WebSocket.OPEN || raw.frames.length === MESSAGES,
        'every reply, or the close',
        30_000,
      );

      expect(raw.socket.readyState).toBe(WebSocket.OPEN);
      expect(raw.frames.map((frame) => frame.result)).toEqual(
        Array.from({ length: MESSAGES }, (_, i) => i + 1),
      );
      // Visited while paused, and kept.
      expect(pingsWhilePaused).toBeGreaterThanOrEqual(1);
      // Still open, and still answering pongs once reading resumed.
      raw.send({ jsonrpc: '2.0', id: 'after', method: 'echo', params: [99, ''] });
      expect((await raw.response('after')).result).toBe(99);
      expect(gateway.sessions.size).toBe(1);
    },
    40_000,
  );

  it('makes no input budget for a connection until it sends', async () => {
    const { gateway, url } = await res.gateway({ limits: { bytesPerSecond: BUDGET } });
    gateway.method('echo', (params) => (params as [number, string])[0]);
    const before = sessionIds(gateway);
    const raw = await openRaw(res, url);
    const socket = (newSession(gateway, before).transport as WsTransport).socket;
    // The limit the gateway shares among connections, not a reading of this one's own.
    expect(socket.inputLimit).toBeDefined();
    expect(socket.inputLimit).not.toHaveProperty('timer');
    expect((await raw.request('echo', [1, ''])).result).toBe(1);
    expect(socket.inputLimit).toHaveProperty('timer');
  });
});

/**
 * With perMessageDeflate, a connection that negotiated it pays DEFLATE_MESSAGE_COST_FACTOR times
 * limits.messageCostBytes for each message, however small (inflating each one costs the gateway
 * that much more); a plain connection to the same gateway pays the floor alone. Counted as the
 * transport hands messages to the session, with a budget that does not refill within the test.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import {
  DEFAULT_MESSAGE_COST_BYTES,
  DEFLATE_MESSAGE_COST_FACTOR,
} from '../../src/transport/ws-transport.js';
import { countHandled, newSession, sessionIds } from '../support/gateway.js';
import { Resources } from '../support/resources.js';
import { openSocket } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const MAX_MESSAGE_BYTES = 8 * 1024;
const BURST = 2 * MAX_MESSAGE_BYTES;
const DEFLATE_FLOOR = DEFAULT_MESSAGE_COST_BYTES * DEFLATE_MESSAGE_COST_FACTOR;

describe('the input budget floor with perMessageDeflate', () => {
  it('charges a compressed connection the higher floor per message, a plain one the floor', async () => {
    const running = await res.gateway({
      perMessageDeflate: { threshold: 0 },
      heartbeatIntervalMs: 0,
      limits: { maxMessageBytes: MAX_MESSAGE_BYTES, bytesPerSecond: 1, bytesPerSecondPerIp: 0 },
    });
    const { gateway, url } = running;

    async function connection(deflate: boolean) {
      const before = sessionIds(gateway);
      const socket = await openSocket(res, url, undefined, {
        perMessageDeflate: deflate ? { threshold: 0 } : false,
      });
      expect(socket.extensions.includes('permessage-deflate')).toBe(deflate);
      const transport = newSession(gateway, before).transport as WsTransport;
      const handled = countHandled(transport);
      return { socket, transport, handled };
    }

    const compressed = await connection(true);
    const request = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'rpc.ping' });
    for (let i = 0; i < 2 * (BURST / DEFLATE_FLOOR); i++) compressed.socket.send(request);
    await waitUntil(() => compressed.transport.inputPaused, 'reading to pause');
    expect(compressed.handled.count).toBe(BURST / DEFLATE_FLOOR);

    // As many on a plain connection stay well within its budget.
    const plain = await connection(false);
    const replies: unknown[] = [];
    plain.socket.on('message', (data) => replies.push(data));
    for (let i = 0; i < 2 * (BURST / DEFLATE_FLOOR); i++) plain.socket.send(request);
    await waitUntil(() => replies.length === 2 * (BURST / DEFLATE_FLOOR), 'every answer');
    expect(plain.transport.inputPaused).toBe(false);
  });
});

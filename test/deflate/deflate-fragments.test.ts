/**
 * Frames by the thousand in one read: a message's frames each cost the input budget what a
 * message does; one read of ten thousand compressed frames (one message's fragments, or
 * messages after the gateway closed the connection) leaves the gateway up; a closing
 * connection inflates at most CLOSING_INFLATES frames on its way to the peer's close frame.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import {
  CLOSING_INFLATES,
  DEFAULT_MESSAGE_COST_BYTES,
  DEFLATE_MESSAGE_COST_FACTOR,
} from '../../src/transport/ws-transport.js';
import { countHandled, newSession, sessionIds } from '../support/gateway.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';
import { frameWith, handmadeDeflateClient } from './wire.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** More frames than the call stack is deep, in one write of under 64 KiB. */
const FRAMES = 10_900;
const EMPTY = Buffer.alloc(0);

/** One message of `frames` frames carrying `text` in its first, uncompressed. */
function fragmented(text: string, frames: number): Buffer {
  const parts = [frameWith(Buffer.from(text), { opcode: 1, fin: frames === 1, compressed: false })];
  for (let i = 1; i < frames; i++) {
    parts.push(frameWith(EMPTY, { opcode: 0, fin: i === frames - 1, compressed: false }));
  }
  return Buffer.concat(parts);
}

describe('frames by the thousand', () => {
  it('a message in several frames costs the floor for each of them', async () => {
    const MAX_MESSAGE_BYTES = 64 * 1024;
    const BURST = 2 * MAX_MESSAGE_BYTES;
    const FRAMES_EACH = 4;
    const { gateway, port } = await res.gateway({
      perMessageDeflate: true,
      heartbeatIntervalMs: 0,
      limits: { maxMessageBytes: MAX_MESSAGE_BYTES, bytesPerSecond: 1, bytesPerSecondPerIp: 0 },
    });
    const before = sessionIds(gateway);
    const client = await handmadeDeflateClient(port);
    await waitUntil(() => gateway.sessions.size === before.size + 1, 'the session');
    const transport = newSession(gateway, before).transport as WsTransport;
    const handled = countHandled(transport);
    // A floor of budget for each message's every frame (the floor of a connection that
    // negotiated compression, as this one did, though these frames are not compressed).
    const floor = DEFLATE_MESSAGE_COST_FACTOR * DEFAULT_MESSAGE_COST_BYTES;
    const request = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'rpc.ping' });
    const messages = BURST / (FRAMES_EACH * floor);
    client.socket.write(
      Buffer.concat(Array.from({ length: 2 * messages }, () => fragmented(request, FRAMES_EACH))),
    );
    await waitUntil(() => transport.inputPaused, 'reading to pause');
    expect(handled.count).toBe(messages);
  });

  it('one read of ten thousand compressed frames of one message leaves the gateway up', async () => {
    const { gateway, port, url } = await res.gateway({ perMessageDeflate: true });
    const attacker = await handmadeDeflateClient(port);
    expect(attacker.head).toContain('permessage-deflate');
    const parts = [frameWith(EMPTY, { opcode: 1, fin: false, compressed: true })];
    for (let i = 1; i < FRAMES; i++)
      parts.push(frameWith(EMPTY, { opcode: 0, fin: false, compressed: false }));
    const write = Buffer.concat(parts);
    expect(write.length).toBeLessThan(64 * 1024);
    attacker.socket.write(write);
    const bystander = res.client(url);
    expect(await bystander.call('rpc.ping')).toBeDefined();
    expect(gateway.sessions.size).toBe(2);
  });

  it('closing, ten thousand compressed messages in one read leave the gateway up, and at most CLOSING_INFLATES are inflated', async () => {
    const { gateway, port, url } = await res.gateway({ perMessageDeflate: true });
    const before = sessionIds(gateway);
    const attacker = await handmadeDeflateClient(port);
    await waitUntil(() => gateway.sessions.size === before.size + 1, 'the session');
    const transport = newSession(gateway, before).transport as WsTransport;
    // A binary frame on a JSON connection: the gateway closes it (1003) and reads on to the
    // peer's close frame; what comes before it is inflated and handled no more.
    attacker.socket.write(frameWith(Buffer.from('x'), { opcode: 2, fin: true, compressed: false }));
    await waitUntil(() => transport.socket.readyState !== transport.socket.OPEN, 'the close');
    const empty = frameWith(Buffer.from([0x00]), { opcode: 1, fin: true, compressed: true });
    attacker.socket.write(Buffer.concat(Array.from({ length: FRAMES }, () => empty)));
    await waitUntil(() => transport.frameWaiting, `a frame left waiting past ${CLOSING_INFLATES}`);
    const bystander = res.client(url);
    expect(await bystander.call('rpc.ping')).toBeDefined();
    await attacker.ended; // the close's grace ends it
  });
});

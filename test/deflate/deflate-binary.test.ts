import { afterEach, describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import { msgpack } from '../../src/msgpack.js';
import { scrape, sampleValue } from '../support/metrics.js';
import { Resources } from '../support/resources.js';
import { recordingClient } from './wire.js';

const res = new Resources();
afterEach(() => res.cleanup());

const LARGE = { text: 'the same words again and again, '.repeat(100) };

describe.each([msgpack, cbor])('permessage-deflate with $name', (codec) => {
  it('compresses a broadcast once per encoding and replies by ws, in binary frames', async () => {
    const { gateway, url, httpUrl } = await res.gateway({
      perMessageDeflate: true,
      encodings: ['json', 'msgpack', 'cbor'],
    });
    gateway.topic('fan');
    gateway.method('echo', (params) => params);
    const open = async (deflate: boolean, binary: boolean) => {
      const c = await recordingClient(
        url,
        { perMessageDeflate: deflate },
        binary ? codec : undefined,
      );
      res.track(c.socket);
      expect(c.socket.protocol).toBe(binary ? codec.subprotocol : '');
      return c;
    };
    const compressedBinary = [await open(true, true), await open(true, true)];
    const plainBinary = await open(false, true);
    const json = await open(true, false);
    const all = [...compressedBinary, plainBinary, json];
    for (const c of all) expect(await c.call('subscribe', ['fan'])).toHaveProperty('result');

    await gateway.publish('fan', LARGE);
    for (const c of all) {
      const [, notification] = await c.waitForMessages(2);
      expect(notification).toMatchObject({ params: { result: LARGE } });
    }
    const broadcast = (c: (typeof all)[number]) => c.wire()[1]!;
    for (const c of compressedBinary)
      expect(broadcast(c)).toMatchObject({ compressed: true, opcode: 2 });
    expect(
      broadcast(compressedBinary[0]!).payload.equals(broadcast(compressedBinary[1]!).payload),
    ).toBe(true);
    expect(broadcast(plainBinary)).toMatchObject({ compressed: false, opcode: 2 });
    expect(broadcast(json)).toMatchObject({ compressed: true, opcode: 1 });

    const big = 'w'.repeat(3_000);
    expect(await compressedBinary[0]!.call('echo', [big])).toMatchObject({ result: [big] });
    expect(compressedBinary[0]!.wire()[2]).toMatchObject({ compressed: true, opcode: 2 });
    expect(await compressedBinary[0]!.call('echo', ['small'])).toMatchObject({ result: ['small'] });
    expect(compressedBinary[0]!.wire()[3]).toMatchObject({ compressed: false, opcode: 2 });

    // One compression for the binary encoding, one for JSON.
    const metrics = await scrape(httpUrl);
    expect(sampleValue(metrics, 'rpc_deflate_broadcasts_compressed_total')).toBe(2);
    expect(sampleValue(metrics, 'rpc_deflate_broadcast_frames_sent_total')).toBe(3);
  });
});

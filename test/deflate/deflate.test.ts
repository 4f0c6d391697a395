import { constants, deflateRawSync, inflateRawSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveGatewayOptions } from '../../src/server/gateway-config.js';
import { scrape, sampleValue } from '../support/metrics.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';
import { handmadeDeflateClient, recordingClient } from './wire.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** A payload well above the default threshold (1024 bytes) that compresses well. */
const LARGE = { text: 'the same words again and again, '.repeat(100) };
const SMALL = { text: 'short' };

async function client(url: string, deflate: boolean) {
  const c = await recordingClient(url, { perMessageDeflate: deflate });
  res.track(c.socket);
  return c;
}

/** The notifications a recording client got, by their payload. */
function results(messages: unknown[]): unknown[] {
  return messages
    .filter((m) => (m as { method?: string }).method === 'subscription')
    .map((m) => (m as { params: { result: unknown } }).params.result);
}

describe('permessage-deflate', () => {
  it('is negotiated with no context takeover either way when on, and not at all when off', async () => {
    const on = await res.gateway({ perMessageDeflate: true });
    const withDeflate = await client(on.url, true);
    const header = withDeflate.extensionsHeader() ?? '';
    expect(header).toContain('permessage-deflate');
    expect(header).toContain('server_no_context_takeover');
    expect(header).toContain('client_no_context_takeover');
    // A client that does not offer it talks plainly to the same gateway.
    const without = await client(on.url, false);
    expect(without.extensionsHeader()).toBeUndefined();
    expect(await without.call('rpc.ping')).toMatchObject({ result: 'pong' });

    const off = await res.gateway();
    const offered = await client(off.url, true);
    expect(offered.extensionsHeader()).toBeUndefined();
  });

  it('compresses a broadcast once and writes the same compressed frame to every subscriber that negotiated it; the others get it plain', async () => {
    const { gateway, url, httpUrl } = await res.gateway({ perMessageDeflate: true });
    gateway.topic('fan');
    const deflating = [await client(url, true), await client(url, true), await client(url, true)];
    const plain = [await client(url, false), await client(url, false)];
    const all = [...deflating, ...plain];
    for (const c of all) expect(await c.call('subscribe', ['fan'])).toHaveProperty('result');

    await gateway.publish('fan', LARGE);
    await gateway.publish('fan', SMALL);
    for (const c of all) {
      await c.waitForMessages(3);
      expect(results(c.messages)).toEqual([LARGE, SMALL]);
    }

    const compressedFrames = deflating.map((c) => c.wire().filter((f) => f.compressed));
    for (const frames of compressedFrames) expect(frames).toHaveLength(1); // the large one only
    const first = compressedFrames[0]![0]!.payload;
    for (const frames of compressedFrames) expect(frames[0]!.payload.equals(first)).toBe(true);
    // RFC 7692: the payload is raw deflate without its 00 00 ff ff tail.
    const inflated = inflateRawSync(Buffer.concat([first, Buffer.from([0, 0, 0xff, 0xff])]), {
      finishFlush: constants.Z_SYNC_FLUSH,
    });
    expect(JSON.parse(inflated.toString('utf8')).params.result).toEqual(LARGE);
    expect(first.length).toBeLessThan(JSON.stringify(LARGE).length / 5);
    for (const c of plain) expect(c.wire().some((f) => f.compressed)).toBe(false);

    const metrics = await scrape(httpUrl);
    expect(sampleValue(metrics, 'rpc_deflate_broadcasts_compressed_total')).toBe(1);
    expect(sampleValue(metrics, 'rpc_deflate_broadcast_frames_sent_total')).toBe(3);
    const bytesIn = sampleValue(metrics, 'rpc_deflate_broadcast_bytes_total', { stage: 'in' })!;
    const bytesOut = sampleValue(metrics, 'rpc_deflate_broadcast_bytes_total', { stage: 'out' });
    expect(bytesIn).toBeGreaterThan(JSON.stringify(LARGE).length);
    expect(bytesOut).toBe(first.length);
  });

  it('sends broadcasts uncompressed to a client that limited the server window below 15, its replies compressed by ws', async () => {
    const { gateway, url, httpUrl } = await res.gateway({ perMessageDeflate: true });
    gateway.topic('fan');
    gateway.method('echo', (params) => params);
    const narrow = await recordingClient(url, { perMessageDeflate: { serverMaxWindowBits: 10 } });
    res.track(narrow.socket);
    expect(narrow.extensionsHeader()).toContain('server_max_window_bits=10');
    expect(await narrow.call('subscribe', ['fan'])).toHaveProperty('result');
    await gateway.publish('fan', LARGE);
    await narrow.waitForMessages(2);
    expect(results(narrow.messages)).toEqual([LARGE]);
    expect(narrow.wire().map((f) => f.compressed)).toEqual([false, false]);
    const big = 'z'.repeat(2_000);
    expect(await narrow.call('echo', [big])).toMatchObject({ result: [big] });
    expect(narrow.wire()[2]!.compressed).toBe(true);
    const metrics = await scrape(httpUrl);
    expect(sampleValue(metrics, 'rpc_deflate_broadcasts_compressed_total')).toBe(0);
  });

  it('sends frames below the threshold uncompressed, replies included, and keeps their order', async () => {
    const { gateway, url } = await res.gateway({ perMessageDeflate: { threshold: 200 } });
    gateway.method('echo', (params) => params);
    gateway.method('burst', (_params, ctx) => {
      // A compressed frame (ws deflates it off this thread) between plain ones, one turn.
      ctx.session.notify('n', [1]);
      ctx.session.notify('n', [2, 'x'.repeat(500)]);
      ctx.session.notify('n', [3]);
      return 'done';
    });
    const c = await client(url, true);
    const big = 'y'.repeat(300);
    expect(await c.call('echo', [big])).toMatchObject({ result: [big] });
    expect(await c.call('echo', ['tiny'])).toMatchObject({ result: ['tiny'] });
    expect(c.wire().map((f) => f.compressed)).toEqual([true, false]);

    await c.call('burst');
    await c.waitForMessages(6);
    const notified = c.messages
      .filter((m) => (m as { method?: string }).method === 'n')
      .map((m) => (m as { params: unknown[] }).params[0]);
    expect(notified).toEqual([1, 2, 3]);
    expect(
      c
        .wire()
        .slice(2, 5)
        .map((f) => f.compressed),
    ).toEqual([false, true, false]);
  });

  it('stops inflating a small frame at maxMessageBytes and closes with 1009; memory stays bounded and the gateway serves on', async () => {
    const maxMessageBytes = 64 * 1024;
    const { port, url } = await res.gateway({
      perMessageDeflate: true,
      limits: { maxMessageBytes },
    });
    // 256 MiB of zeros, deflated to about 250 KiB: what inflating it whole would cost shows.
    const zeros = Buffer.alloc(256 * 1024 * 1024);
    const compressed = deflateRawSync(zeros, { level: 9 });
    const before = process.memoryUsage().arrayBuffers - zeros.length;
    let peak = 0;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().arrayBuffers - zeros.length - before);
    }, 1);

    const attacker = await handmadeDeflateClient(port);
    res.netSockets.push(attacker.socket);
    expect(attacker.head).toContain('permessage-deflate');
    attacker.sendFrame(compressed, true);
    await waitUntil(() => attacker.frames().some((f) => f.opcode === 8), 'a close frame');
    clearInterval(sampler);
    const close = attacker.frames().find((f) => f.opcode === 8)!;
    expect(close.payload.readUInt16BE(0)).toBe(1009);
    // Inflating it whole would hold 256 MiB; the gateway stopped at its limit.
    expect(peak).toBeLessThan(32 * 1024 * 1024);

    const other = await client(url, true);
    expect(await other.call('rpc.ping')).toMatchObject({ result: 'pong' });
  });

  it('refuses a bad perMessageDeflate option, naming it and its range', () => {
    expect(() => resolveGatewayOptions({ perMessageDeflate: 'yes' })).toThrow(
      /perMessageDeflate must be a boolean or an object/,
    );
    expect(() => resolveGatewayOptions({ perMessageDeflate: { level: 12 } })).toThrow(
      new RangeError('perMessageDeflate.level must be an integer from 0 to 9, not 12'),
    );
    expect(() => resolveGatewayOptions({ perMessageDeflate: { memLevel: 0 } })).toThrow(
      /perMessageDeflate.memLevel must be an integer from 1 to 9/,
    );
    expect(() => resolveGatewayOptions({ perMessageDeflate: { treshold: 10 } })).toThrow(
      /perMessageDeflate.treshold is not an option of perMessageDeflate \(did you mean perMessageDeflate.threshold\?\)/,
    );
    expect(resolveGatewayOptions({}).http.perMessageDeflate).toBeUndefined();
    expect(
      resolveGatewayOptions({ perMessageDeflate: { threshold: 0 } }).http.perMessageDeflate,
    ).toEqual({ threshold: 0, level: 6, memLevel: 8 });
  });
});

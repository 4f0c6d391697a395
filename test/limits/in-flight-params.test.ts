/**
 * What a connection can make the gateway hold through calls in flight: their params, while a
 * handler that keeps them runs, or while an async `authorize` hook decides (the gateway holds
 * them until it has). Bounded per connection by maxInFlight × maxMessageBytes, a product of two
 * limits, and not counted toward maxBufferedBytesTotal: once a handler is called the gateway
 * keeps nothing of its params (`node --expose-gc bench/in-flight-params.mjs drop`: 0.4 MiB for
 * 128 calls of 1 MiB; `retain` and `authorize`: 128.4 MiB). Here the held params are counted as
 * the handler and hook see them: the call past maxInFlight is refused -32000 with
 * `data: { maxInFlight }`, so what is held stays within the product; once released, every call
 * is answered.
 */
import { afterEach, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const MAX_IN_FLIGHT = 16;
const MAX_MESSAGE_BYTES = 64 * 1024;
/** A request just within maxMessageBytes: its params a string of this many characters. */
const PARAM_CHARS = MAX_MESSAGE_BYTES - 100;

it.each(['a handler that keeps its params', 'an async authorize hook'])(
  'params held by calls in flight (%s) are at most maxInFlight × maxMessageBytes',
  async (holder) => {
    const releases: (() => void)[] = [];
    /** Characters of params held right now, as the holders see them. */
    let held = 0;
    const hold = (params: unknown): Promise<void> => {
      const length = (params as [string])[0].length;
      held += length;
      return new Promise((resolve) =>
        releases.push(() => {
          held -= length;
          resolve();
        }),
      );
    };
    const byHook = holder === 'an async authorize hook';
    const { url, gateway } = await res.gateway({
      heartbeatIntervalMs: 0,
      limits: {
        maxInFlight: MAX_IN_FLIGHT,
        maxMessageBytes: MAX_MESSAGE_BYTES,
        bytesPerSecond: 0,
        bytesPerSecondPerIp: 0,
        ratePerSecond: 0,
      },
      ...(byHook ? { authorize: ({ params }) => hold(params).then(() => true) } : {}),
    });
    gateway.method('hold', async (params) => {
      if (!byHook) await hold(params);
      return (params as [string])[0].length;
    });
    const socket = res.track(new WebSocket(url));
    await new Promise((resolve) => socket.once('open', resolve));
    const replies: { id: number; result?: number; error?: { code: number; data?: unknown } }[] = [];
    socket.on('message', (data: Buffer) => replies.push(JSON.parse(data.toString())));
    const pad = 'x'.repeat(PARAM_CHARS);
    for (let id = 1; id <= MAX_IN_FLIGHT + 1; id++) {
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'hold', params: [pad] }));
    }
    await waitUntil(
      () => releases.length === MAX_IN_FLIGHT && replies.length === 1,
      'the calls to be held, and one refused',
    );
    expect(replies[0]).toMatchObject({
      id: MAX_IN_FLIGHT + 1,
      error: { code: -32000, data: { maxInFlight: MAX_IN_FLIGHT } },
    });
    // The measure: 16 × 65 436 characters = 1 046 976, within 16 × 64 KiB = 1 048 576.
    expect(held).toBe(MAX_IN_FLIGHT * PARAM_CHARS);
    expect(held).toBeLessThanOrEqual(MAX_IN_FLIGHT * MAX_MESSAGE_BYTES);
    for (const release of releases.splice(0)) release();
    await waitUntil(() => replies.length === MAX_IN_FLIGHT + 1, 'every call answered');
    expect(held).toBe(0);
    expect(replies.slice(1).every((reply) => reply.result === PARAM_CHARS)).toBe(true);
  },
);

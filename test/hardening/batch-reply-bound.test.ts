/**
 * A batch's reply is bounded (MAX_BATCH_REPLY_CHARS): a batch multiplies what one call answers
 * by up to maxBatch, and its reply, joined into one string, once passed V8's string limit and
 * threw in a promise no one awaited, which ended the process. Members whose reply would take the
 * batch past the bound are answered -32603 under their own id instead; the others as they are.
 *
 * The rule against its model (batchReply, any sizes, a small bound), then a real gateway asked
 * for a batch of large results over a WebSocket and over POST.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeFailure, encodeSuccess } from '../../src/protocol/encode.js';
import { MAX_BATCH_REPLY_CHARS, batchReply } from '../../src/peer/replies.js';
import type { Reply } from '../../src/peer/replies.js';
import type { Incoming } from '../../src/protocol/classify.js';
import { openRawSocket, startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';

const tooLarge = (maxChars: number) => ({
  code: -32603,
  message: 'Reply too large',
  data: { reason: 'batch reply too large', maxBatchReplyChars: maxChars },
});

describe('batchReply, against its model', () => {
  it('keeps the joined reply within the bound, answers every call once under its id, in order', () => {
    fc.assert(
      fc.property(
        fc.array(fc.option(fc.nat({ max: 400 }), { nil: undefined }), { maxLength: 20 }),
        fc.integer({ min: 2, max: 2_000 }),
        fc.boolean(),
        (sizes, maxChars, hooked) => {
          const ran: number[] = [];
          const replies: Reply[] = sizes.map((size, i) => {
            if (size === undefined) return undefined; // a notification
            const text = encodeSuccess(i, 'x'.repeat(size));
            return hooked ? { text, afterSend: () => ran.push(i) } : text;
          });
          const messages = sizes.map((_, i): Incoming => ({
            kind: 'request',
            version: '2.0',
            id: i,
            method: 'm',
            params: undefined,
          }));
          const { parts, hooks } = batchReply(replies, messages, maxChars);
          for (const hook of hooks) hook();
          // The model: in order, each call's own reply while it fits, else the refusal.
          let chars = 1;
          const expected: string[] = [];
          const sent: number[] = [];
          sizes.forEach((size, i) => {
            if (size === undefined) return;
            const own = encodeSuccess(i, 'x'.repeat(size));
            const text =
              chars + own.length + 1 > maxChars ? encodeFailure(i, tooLarge(maxChars)) : own;
            if (text === own && hooked) sent.push(i);
            chars += text.length + 1;
            expected.push(text);
          });
          expect(parts).toEqual(expected);
          expect(ran).toEqual(sent);
          // Within the bound, but for the refusals themselves (a bound smaller than one).
          const refusals = parts.filter((p) => p.includes('"Reply too large"'));
          const kept = parts.filter((p) => !p.includes('"Reply too large"'));
          expect(kept.reduce((n, p) => n + p.length + 1, 1)).toBeLessThanOrEqual(maxChars);
          expect(refusals.length + kept.length).toBe(sizes.filter((s) => s !== undefined).length);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('a batch asking for more than MAX_BATCH_REPLY_CHARS', () => {
  let running: RunningGateway | undefined;
  afterEach(async () => {
    await running?.gateway.close({ timeoutMs: 0 });
    running = undefined;
  });

  /** 100 calls of a 1 MiB result each: 100 MiB asked, the bound is 64 MiB. */
  const MIB = 1 << 20;
  const batch = JSON.stringify(
    Array.from({ length: 100 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'big' })),
  );

  function check(replyText: string): void {
    expect(replyText.length).toBeLessThanOrEqual(MAX_BATCH_REPLY_CHARS);
    const reply = JSON.parse(replyText) as { id: number; result?: string; error?: unknown }[];
    expect(reply.map((r) => r.id)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    const answered = reply.filter((r) => r.result !== undefined);
    // As many whole results as fit, then the refusals.
    expect(answered.length).toBe(Math.floor(MAX_BATCH_REPLY_CHARS / (MIB + 40)));
    expect(answered.every((r) => r.result!.length === MIB - 30)).toBe(true);
    for (const r of reply.slice(answered.length)) {
      expect(r.error).toEqual(tooLarge(MAX_BATCH_REPLY_CHARS));
    }
  }

  it('over a WebSocket: answered within the bound, and the gateway answers on', async () => {
    running = await startGateway({ limits: { maxBufferedBytes: 0 } });
    running.gateway.method('big', () => Promise.resolve('y'.repeat(MIB - 30)));
    const raw = await openRawSocket(running.url);
    try {
      raw.socket.send(batch);
      check((await raw.waitFor(1))[0]!);
      raw.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 'after', method: 'rpc.ping' }));
      expect(JSON.parse((await raw.waitFor(2))[1]!)).toEqual({
        jsonrpc: '2.0',
        id: 'after',
        result: 'pong',
      });
    } finally {
      raw.close();
    }
  }, 60_000);

  it('over POST: the same', async () => {
    running = await startGateway();
    running.gateway.method('big', () => 'y'.repeat(MIB - 30));
    const response = await fetch(running.httpUrl + '/rpc', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: batch,
    });
    expect(response.status).toBe(200);
    check(await response.text());
  }, 60_000);
});

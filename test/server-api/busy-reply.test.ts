/**
 * What the server API's NATS consumer answers a message it has no room for: -32000 under each
 * request's id, exactly as sent; an invalid member's own error; id null when nothing in the
 * message has an id.
 */
import { describe, expect, it } from 'vitest';
import { busyReply } from '../../src/server-api/busy-reply.js';

const BUSY = { code: -32000, message: 'Server busy' };
const parse = { maxBatch: 100, maxDepth: 64 };
const reply = (text: string): unknown => JSON.parse(busyReply(text, parse));

describe('busyReply', () => {
  it('answers a request -32000 under its id', () => {
    expect(reply('{"jsonrpc":"2.0","id":"a","method":"publish","params":{}}')).toEqual({
      jsonrpc: '2.0',
      id: 'a',
      error: BUSY,
    });
  });

  it('writes a numeric id back as it was sent', () => {
    expect(busyReply('{"jsonrpc":"2.0","id":12345678901234567890,"method":"x"}', parse)).toBe(
      '{"jsonrpc":"2.0","error":{"code":-32000,"message":"Server busy"},"id":12345678901234567890}',
    );
  });

  it("answers a batch's requests as a batch, an invalid member with its own error", () => {
    expect(
      reply(
        '[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"note"},{"jsonrpc":"2.0","id":2,"method":7}]',
      ),
    ).toEqual([
      { jsonrpc: '2.0', id: 1, error: BUSY },
      { jsonrpc: '2.0', id: 2, error: expect.objectContaining({ code: -32600 }) as unknown },
    ]);
  });

  it('answers id null when the message holds no request: notifications, or not JSON', () => {
    expect(reply('{"jsonrpc":"2.0","method":"note"}')).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: BUSY,
    });
    expect(reply('[{"jsonrpc":"2.0","method":"note"}]')).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: BUSY,
    });
    expect(reply('not json')).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: expect.objectContaining({ code: -32700 }) as unknown,
    });
  });
});

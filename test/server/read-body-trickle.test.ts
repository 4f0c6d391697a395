/**
 * A request body read in many small pieces (a client writing a byte a TCP segment) is held as
 * one buffer it is copied into, not as the pieces: each piece is an object of some 64 bytes or
 * more, so a body trickled a byte at a time held about 64 times its size until it ended, which
 * an address's HTTP sockets could multiply.
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { expect, it } from 'vitest';
import { readBodyBytes } from '../../src/server/read-body.js';
import { fullGc, heapUsedButCode } from '../support/heap.js';

const PIECES = 50_000;

function request(length: number): IncomingMessage {
  const req = Object.assign(new EventEmitter(), {
    headers: { 'content-length': String(length) },
    destroyed: false,
    socket: { destroyed: false },
    resume: () => undefined,
  });
  return req as unknown as IncomingMessage;
}

const response = {
  destroyed: false,
  headersSent: false,
  writeHead: () => undefined,
  end: () => undefined,
} as unknown as ServerResponse;

it('50,000 one-byte pieces of a body under way hold a few bytes each, and the body is read whole', async () => {
  const req = request(PIECES);
  const body = readBodyBytes(req, response, { maxBytes: 1 << 20, timeoutMs: 60_000 });
  fullGc();
  const before = heapUsedButCode();
  for (let i = 0; i < PIECES; i++) req.emit('data', Buffer.from([0x30 + (i % 10)]));
  fullGc();
  const perByte = (heapUsedButCode() - before) / PIECES;
  req.emit('end');
  const read = (await body)!;
  expect(read.length).toBe(PIECES);
  expect(read.subarray(0, 12).toString()).toBe('012345678901');
  // The body itself is a byte a byte (its buffer grows by doubling: at most two).
  expect(perByte).toBeLessThan(8);
});

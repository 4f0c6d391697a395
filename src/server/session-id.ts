import { randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** 22 of the 62 letters and digits: about 131 bits. */
export const SESSION_ID_RANDOM_CHARS = 22;

/** Random bytes drawn ahead, one per letter (those of 62 and 63 after masking are skipped). */
const pool = Buffer.alloc(4096);
let poolAt = pool.length;

function randomByte(): number {
  if (poolAt === pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  return pool[poolAt++]!;
}

/**
 * A session id: `prefix` (the node's id and '-'), then 22 random letters and digits (never a
 * '-', so the node id before the last '-' can be read back: SessionRouter.notifySession), each
 * of the 62 equally likely. Made as one flat string from its character codes: a string built a
 * character at a time (as nanoid does) is a chain of a dozen V8 cons strings, about 350 bytes
 * per session for as long as it lives.
 */
export function sessionIdOf(prefix: string): string {
  const codes = new Array<number>(prefix.length + SESSION_ID_RANDOM_CHARS);
  let at = 0;
  for (; at < prefix.length; at++) codes[at] = prefix.charCodeAt(at);
  while (at < codes.length) {
    const b = randomByte() & 63;
    if (b < ALPHABET.length) codes[at++] = ALPHABET.charCodeAt(b);
  }
  return String.fromCharCode(...codes);
}

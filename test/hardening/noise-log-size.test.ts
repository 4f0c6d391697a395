/**
 * A line of protocol noise is bounded in size as well as in number: the id and the error of a
 * response that matches no call are the other side's, as long as its message may be, and are
 * cut to MAX_SHOWN_NOISE_CHARS with their length beside them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_SHOWN_NOISE_CHARS } from '../../src/peer/noise-log.js';
import { capturedPino } from '../support/logging.js';
import { Resources } from '../support/resources.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

const BIG = 200_000;

describe('the size of protocol noise lines', () => {
  it('a long id and a long error of unmatched responses are cut, their lengths logged', async () => {
    const { logger, lines } = capturedPino('debug');
    const { url } = await res.gateway({ logger });
    const raw = await openRaw(res, url);
    const longId = `i${'d'.repeat(BIG)}`;
    const longError = { code: 1, message: 'x'.repeat(BIG) };
    raw.send({ jsonrpc: '2.0', id: longId, result: 1 });
    raw.send({ jsonrpc: '2.0', id: 'short', error: longError });
    raw.send({ jsonrpc: '2.0', id: 7, error: { code: 2, message: 'small' } });
    // A malformed response (result and error) with a long id.
    raw.send({ jsonrpc: '2.0', id: longId, result: 1, error: 1 });
    await raw.barrier();

    const noise = lines
      .filter((line) => /matches no pending call|malformed response/.test(line))
      .map((line) => ({ length: line.length, line: JSON.parse(line) as Record<string, unknown> }));
    expect(noise).toHaveLength(4);
    for (const { length } of noise) expect(length).toBeLessThan(4 * MAX_SHOWN_NOISE_CHARS);
    const [byId, byError, small, malformed] = noise.map((n) => n.line);
    expect(byId).toMatchObject({ id: longId.slice(0, MAX_SHOWN_NOISE_CHARS), idChars: BIG + 1 });
    const errorText = JSON.stringify(longError);
    expect(byError).toMatchObject({
      id: 'short',
      error: errorText.slice(0, MAX_SHOWN_NOISE_CHARS),
      errorChars: errorText.length,
    });
    expect(byError).not.toHaveProperty('idChars');
    // What fits is shown as it came.
    expect(small).toMatchObject({ id: 7, error: { code: 2, message: 'small' } });
    expect(small).not.toHaveProperty('errorChars');
    expect(malformed).toMatchObject({ idChars: BIG + 1 });
  });
});

/**
 * Credentials inside an Error reach the log blanked, as they do in a plain object: an HTTP
 * client's error carries the request it made (its headers, its URL), and pino's `err`
 * serializer writes every enumerable property of an error, its message and stack and its
 * cause's.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { scrubLogged } from '../../src/index.js';
import { capturedPino } from '../support/logging.js';
import { Resources } from '../support/resources.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** An error as an HTTP client throws it: the request's URL and headers among its properties. */
class RequestFailed extends Error {
  config: { url: string; headers: Record<string, string> };
  constructor(message: string, secret: string) {
    super(message);
    this.name = 'RequestFailed';
    this.config = {
      url: `https://billing.internal/charge?token=${secret}-url&id=7`,
      headers: { Authorization: `Bearer ${secret}-header`, Accept: 'application/json' },
    };
  }
}

describe('errors in the log', () => {
  it('a handler that throws an HTTP client error: its "handler failed" line carries no credential', async () => {
    const { logger, lines } = capturedPino();
    const { gateway, url } = await res.gateway({ logger });
    gateway.method('charge', async () => {
      await Promise.resolve();
      throw new RequestFailed('Request failed with status code 401', 'SECRET-1');
    });
    const raw = await openRaw(res, url);
    expect((await raw.request('charge')).error?.code).toBe(-32603);

    const failed = lines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line['msg'] === 'handler failed');
    expect(failed).toHaveLength(1);
    expect(lines.join('')).not.toContain('SECRET');
    expect(failed[0]!['err']).toMatchObject({
      type: 'RequestFailed',
      message: 'Request failed with status code 401',
      config: {
        url: 'https://billing.internal/charge?token=[redacted]&id=7',
        headers: { Authorization: '[redacted]', Accept: 'application/json' },
      },
    });
    expect((failed[0]!['err'] as { stack: string }).stack).toContain('RequestFailed');
  });

  it("an error anywhere in a line: its properties, its message and stack, its cause, and an AggregateError's errors", () => {
    const { logger, lines } = capturedPino();
    const inner = new RequestFailed(
      'fetch https://x.example/?access_token=SECRET-2 failed',
      'SECRET-3',
    );
    const outer = new Error('charge failed', { cause: inner });
    (outer as unknown as Record<string, unknown>)['token'] = 'SECRET-4';
    const many = new AggregateError([new RequestFailed('one', 'SECRET-5')], 'all failed');
    logger.error({ err: outer, detail: { failure: inner } }, 'direct');
    logger.error({ err: many }, 'aggregate');
    expect(lines).toHaveLength(2);
    expect(lines.join('')).not.toContain('SECRET');
    expect(JSON.parse(lines[1]!)).toMatchObject({
      err: { aggregateErrors: [{ config: { headers: { Authorization: '[redacted]' } } }] },
    });
    const line = JSON.parse(lines[0]!) as Record<string, Record<string, unknown>>;
    expect(line['err']).toMatchObject({ type: 'Error', token: '[redacted]' });
    expect(line['err']!['message']).toBe(
      'charge failed: fetch https://x.example/?access_token=[redacted] failed',
    );
    expect(line['detail']!['failure']).toMatchObject({
      config: { headers: { Authorization: '[redacted]' } },
    });
    // The error logged is left as it was: a copy is what is scrubbed.
    expect(inner.config.headers['Authorization']).toBe('Bearer SECRET-3-header');
    expect((outer as unknown as Record<string, unknown>)['token']).toBe('SECRET-4');
  });

  it('scrubLogged: an error with nothing to blank is passed as it is, one with something is copied as its class', () => {
    const plain = new TypeError('nothing secret here');
    expect(scrubLogged({ err: plain })).toEqual({ err: plain });
    expect((scrubLogged({ err: plain }) as { err: unknown }).err).toBe(plain);
    const secret = new RequestFailed('denied', 'SECRET-6');
    const scrubbed = (scrubLogged({ err: secret }) as { err: RequestFailed }).err;
    expect(scrubbed).not.toBe(secret);
    expect(scrubbed).toBeInstanceOf(RequestFailed);
    expect(scrubbed.name).toBe('RequestFailed');
    expect(scrubbed.message).toBe('denied');
    expect(scrubbed.stack).toBe(secret.stack);
    expect(scrubbed.config.headers['Authorization']).toBe('[redacted]');
  });
});

/**
 * An `allowedOrigins` predicate allows an Origin only by returning `true`. An async predicate
 * returns a promise, truthy whatever it will hold: taken as an answer it would let every page in
 * (a cross-site POST read with the user's cookies, a WebSocket opened as the user). Any answer
 * that is no boolean refuses, on POST /rpc, its preflight and the upgrade alike, and the gateway
 * logs once that the predicate must answer a boolean synchronously.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { GatewayOptions } from '../../src/server/options.js';
import {
  NOT_BOOLEAN_ORIGIN_ANSWER,
  THROWING_ORIGIN_PREDICATE,
} from '../../src/server/admission.js';
import { CaptureLogger } from '../support/logging.js';
import { Resources } from '../support/resources.js';
import { attemptUpgrade } from '../support/sockets.js';
import { exchange } from '../sse/sse-raw.js';

const res = new Resources();
afterEach(() => res.cleanup());

const GOOD = 'https://good.example';
const EVIL = 'https://evil.example';
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'who' });

/** What the type allows no async predicate to be, as JavaScript callers can pass one anyway. */
type Predicate = GatewayOptions<unknown>['allowedOrigins'];
const asPredicate = (predicate: (origin: string) => unknown): Predicate => predicate as Predicate;

async function gatewayWith(allowedOrigins: Predicate) {
  const logger = new CaptureLogger();
  const running = await res.gateway({ allowedOrigins, logger });
  running.gateway.method('who', () => 'answered');
  return { ...running, logger };
}

function post(httpUrl: string, origin: string) {
  return exchange(
    `${httpUrl}/rpc`,
    'POST',
    { origin, 'content-type': 'application/json', cookie: 'sid=the-user' },
    BODY,
  );
}

describe('an allowedOrigins predicate that answers no boolean', () => {
  // What `async (origin) => origin === GOOD` returns.
  const isGood = asPredicate((origin: string) => Promise.resolve(origin === GOOD));

  it('async: a cross-site POST and its preflight are refused, granted no CORS', async () => {
    const { httpUrl } = await gatewayWith(isGood);
    const answer = await post(httpUrl, EVIL);
    expect(answer.status).toBe(403);
    expect(answer.text).toBe('Origin not allowed\n');
    expect(answer.headers['access-control-allow-origin']).toBeUndefined();
    expect(answer.headers['access-control-allow-credentials']).toBeUndefined();

    const preflight = await exchange(`${httpUrl}/rpc`, 'OPTIONS', {
      origin: EVIL,
      'access-control-request-method': 'POST',
    });
    expect(preflight.status).toBe(403);
    expect(preflight.headers['access-control-allow-credentials']).toBeUndefined();
  });

  it('async: a cross-site WebSocket upgrade is refused 403', async () => {
    const { url } = await gatewayWith(isGood);
    expect(await attemptUpgrade(res, url, { origin: EVIL })).toBe(403);
    // A request without an Origin is no browser's, and is not asked about.
    expect(await attemptUpgrade(res, url)).toBe('open');
  });

  it('async: the origin it means to allow is refused too, and the error is logged once', async () => {
    const { url, httpUrl, logger } = await gatewayWith(isGood);
    expect(await attemptUpgrade(res, url, { origin: GOOD })).toBe(403);
    expect((await post(httpUrl, GOOD)).status).toBe(403);
    expect(await attemptUpgrade(res, url, { origin: EVIL })).toBe(403);
    const told = logger.withMessage(NOT_BOOLEAN_ORIGIN_ANSWER);
    expect(told.map((record) => [record.level, record.obj])).toEqual([
      ['error', { returned: 'promise' }],
    ]);
  });

  it('a truthy answer that is not true refuses; a rejected promise neither allows nor ends the process', async () => {
    // Made when asked: a rejection the gateway left unhandled would fail the run.
    const answers: (() => unknown)[] = [
      () => 1,
      () => 'yes',
      () => ({}),
      () => Promise.reject(new Error('lookup failed')),
    ];
    let asked = 0;
    const { url, httpUrl, logger } = await gatewayWith(
      asPredicate(() => answers[asked++ % answers.length]!()),
    );
    for (let i = 0; i < answers.length; i++) {
      expect(await attemptUpgrade(res, url, { origin: EVIL }), String(i)).toBe(403);
    }
    expect(asked).toBe(4);
    expect(
      (
        await exchange(
          `${httpUrl}/rpc`,
          'POST',
          { origin: EVIL, 'content-type': 'application/json' },
          BODY,
        )
      ).status,
    ).toBe(403);
    expect(logger.withMessage(NOT_BOOLEAN_ORIGIN_ANSWER)).toHaveLength(1);
  });

  it('one that throws refuses (403, not 500), logged once', async () => {
    const { url, httpUrl, logger } = await gatewayWith(() => {
      throw new Error('lookup failed');
    });
    expect(await attemptUpgrade(res, url, { origin: GOOD })).toBe(403);
    expect((await post(httpUrl, GOOD)).status).toBe(403);
    expect(logger.withMessage(THROWING_ORIGIN_PREDICATE)).toHaveLength(1);
  });

  it('true allows, false refuses, as before', async () => {
    const { url, httpUrl, logger } = await gatewayWith((origin: string) => origin === GOOD);
    expect(await attemptUpgrade(res, url, { origin: GOOD })).toBe('open');
    expect(await attemptUpgrade(res, url, { origin: EVIL })).toBe(403);
    const answer = await post(httpUrl, GOOD);
    expect(answer.status).toBe(200);
    expect(answer.headers['access-control-allow-origin']).toBe(GOOD);
    expect(answer.headers['access-control-allow-credentials']).toBe('true');
    expect(logger.withMessage(NOT_BOOLEAN_ORIGIN_ANSWER)).toEqual([]);
  });
});

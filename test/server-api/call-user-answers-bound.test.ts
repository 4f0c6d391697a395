/**
 * callClient by user gathers one answer per session of the user: the answers' JSON together is
 * held to MAX_USER_ANSWERS_CHARS, so that a user's clients (as many sessions as
 * maxConnectionsPerUser, each answering up to maxMessageBytes) cannot make one reply hold a GiB.
 * An answer that would pass it is replaced by -32000 naming the session and the bound; the
 * answers before it are kept whole.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_USER_ANSWERS_CHARS } from '../../src/server-api/node-requests.js';
import { ApiResources, asUser, post, userOptions } from './support.js';

const res = new ApiResources();
afterEach(() => res.cleanup());

describe('callClient by user: the answers together', () => {
  it(`are held to MAX_USER_ANSWERS_CHARS (${MAX_USER_ANSWERS_CHARS}); one past it is -32000`, async () => {
    const running = await res.gateway({
      ...userOptions(),
      limits: { maxMessageBytes: 2 * 1024 * 1024 },
    });
    const api = await res.api(running.gateway);
    // Each session answers a string of 40% of the bound: two fit, a third does not.
    const big = 'x'.repeat(Math.floor(MAX_USER_ANSWERS_CHARS * 0.4));
    const SESSIONS = 4;
    for (let i = 0; i < SESSIONS; i++) {
      const client = res.client(asUser(running.url, 'many'));
      client.method('big', () => big);
      await client.call('rpc.ping');
    }
    const reply = await post(api.url, 'callClient', {
      user: 'many',
      method: 'big',
      timeoutMs: 60_000,
    });
    const results = (reply.body?.result as { results: Record<string, unknown>[] }).results;
    expect(results).toHaveLength(SESSIONS);
    const whole = results.filter((r) => r['result'] === big);
    const refused = results.filter((r) => r['error'] !== undefined);
    expect(whole).toHaveLength(2);
    expect(refused).toHaveLength(SESSIONS - 2);
    for (const r of refused) {
      expect(r['error']).toEqual({
        code: -32000,
        message: "The answers of the user's sessions are over the reply's bound",
        data: {
          sessionId: r['sessionId'],
          reason: 'answers too large',
          limit: MAX_USER_ANSWERS_CHARS,
        },
      });
    }
  });
});

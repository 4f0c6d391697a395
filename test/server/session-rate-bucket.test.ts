import { afterEach, expect, it } from 'vitest';
import type { Session } from '../../src/server/session.js';
import { TokenBucket } from '../../src/server/token-bucket.js';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

/*
 * A session's rate limit (limits.ratePerSecond) costs an idle connection no bucket: the session
 * is its peer's `admit` and makes its bucket on the first message it is sent.
 */

const res = new Resources();
afterEach(() => res.cleanup());

/** The token buckets a session and its peer hold in their own fields. */
function bucketsHeld(session: Session): unknown[] {
  return [...Object.values(session), ...Object.values(session.peer)].filter(
    (value) => value instanceof TokenBucket,
  );
}

it('an idle session holds no token bucket; its first message makes one', async () => {
  const { gateway, url } = await res.gateway({ limits: { ratePerSecond: 0.001, rateBurst: 2 } });
  gateway.method('echo', (params) => params);
  const raw = await RawRpc.open(url);
  res.track(raw.socket);
  await waitUntil(() => gateway.sessions.size === 1, 'the session to open');
  const session = [...gateway.sessions.values()][0]!;

  expect(bucketsHeld(session)).toEqual([]);

  expect((await raw.request('echo', [1])).result).toEqual([1]);
  expect(bucketsHeld(session)).toHaveLength(1);
  // The bucket made on the first message is full, as one made at the opening would be.
  expect((await raw.request('echo', [2])).result).toEqual([2]);
  expect((await raw.request('echo', [3])).error?.code).toBe(-32003);
});

it('sessions of a gateway without a rate limit hold no bucket and are let through', async () => {
  const { gateway, url } = await res.gateway({ limits: { ratePerSecond: 0 } });
  gateway.method('echo', (params) => params);
  const raw = await RawRpc.open(url);
  res.track(raw.socket);
  await waitUntil(() => gateway.sessions.size === 1, 'the session to open');
  const session = [...gateway.sessions.values()][0]!;

  for (let i = 0; i < 5; i++) expect((await raw.request('echo', [i])).result).toEqual([i]);
  expect(bucketsHeld(session)).toEqual([]);
});

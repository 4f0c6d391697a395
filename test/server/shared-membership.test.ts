import { afterEach, expect, it } from 'vitest';
import type { Session } from '../../src/server/session.js';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** What a session holds to join and leave topics with: its own values that have both. */
function membershipHeld(session: Session): unknown[] {
  return Object.values(session).filter(
    (value) => typeof value === 'object' && value !== null && 'join' in value && 'leave' in value,
  );
}

it('sessions share one membership object, and each joins and leaves through it', async () => {
  const { gateway, url } = await res.gateway();
  gateway.topic('news');
  const a = await RawRpc.open(url);
  const b = await RawRpc.open(url);
  res.track(a.socket);
  res.track(b.socket);
  await waitUntil(() => gateway.sessions.size === 2, 'both sessions to open');
  const [first, second] = [...gateway.sessions.values()] as [Session, Session];

  const held = [membershipHeld(first), membershipHeld(second)];
  expect(held[0]).toHaveLength(1);
  expect(held[1]).toHaveLength(1);
  expect(held[0]![0]).toBe(held[1]![0]);

  const id = await first.join('news');
  expect(typeof id).toBe('string');
  void gateway.publish('news', 'hello');
  await a.until(() => a.notifications(id).length === 1, 'the message on the joined session');
  expect(first.leave('news')).toBe(true);
  expect(second.leave('news')).toBe(false);
});

import { afterEach, expect, it } from 'vitest';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

it('a session tells when it opened, in ms since the epoch', async () => {
  const { gateway, url } = await res.gateway();
  const before = Date.now();
  const raw = await RawRpc.open(url);
  res.track(raw.socket);
  await waitUntil(() => gateway.sessions.size === 1, 'the session to open');
  const after = Date.now();
  const session = [...gateway.sessions.values()][0]!;

  expect(Number.isInteger(session.connectedAt)).toBe(true);
  expect(session.connectedAt).toBeGreaterThanOrEqual(before);
  expect(session.connectedAt).toBeLessThanOrEqual(after);
});

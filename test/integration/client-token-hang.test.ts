// A getToken that never settles, once, when the server asks for a fresh token (rpc.token): that
// session expires (4419), but later connections' rpc.token must each get a token of their own,
// not wait on the one that hung.
import { afterEach, expect, it } from 'vitest';
import type { UpgradeRequest } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

interface Identity {
  user: string;
  expiresAt: number;
}

function authenticate(request: UpgradeRequest): Identity {
  const [user, expiresAt] = (request.token ?? '').split('.');
  return { user: user!, expiresAt: Number(expiresAt) };
}

it('a getToken that hung on one rpc.token does not leave the next connections unrefreshed', async () => {
  const { url, gateway } = await res.gateway<Identity>({
    authenticate,
    userOf: (context) => context.user,
    identity: { inBand: true, expiresAtOf: (context) => context.expiresAt, refreshAheadMs: 1_000 },
  });
  gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
  let asked = 0;
  const client = res.client(url, {
    getToken: () => {
      asked++;
      // The first connection's rpc.token: never answered.
      if (asked === 2) return new Promise<string>(() => undefined);
      return Promise.resolve(`alice.${Date.now() + 1_500}`);
    },
  });
  const codes: (number | undefined)[] = [];
  client.disconnects$.subscribe((event) => codes.push(event.code));
  expect(await client.call('whoami')).toBe('alice');
  // The first session expires (4419) and the client dials again with a fresh token.
  await waitUntil(
    () => codes.length === 1 && client.state === 'open',
    'the second connection',
    5_000,
  );
  expect(codes).toEqual([4419]);
  // The second session is asked for a fresh token ahead of its expiry: getToken must be called.
  await waitUntil(() => asked >= 4, 'getToken asked for the second session', 3_000);
  await waitUntil(
    () => [...gateway.sessions.values()][0]!.expiresAt! > Date.now() + 1_000,
    'the refresh',
    3_000,
  );
  expect(codes).toEqual([4419]);
});

// docs/identity.md, "The client": getToken gives the token of each dial, a string. One that gives
// anything else, undefined or an empty string included, is a provider that failed: the dial is not
// made, disconnects$ tells the TypeError, and the client dials again with the backoff, asking
// getToken anew. Against a real gateway with jwtAuth, in-band and with the header transport.
import { afterEach, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { disconnectsOf, signHs256, whoamiJwtGateway } from '../jwt/jwt-fixtures.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** A getToken that gives `first` on its first call, then good tokens; and how often it was asked. */
function tokensAfter(first: unknown) {
  const asked = { count: 0 };
  const getToken = async (): Promise<string> =>
    ++asked.count === 1 ? (first as string) : signHs256();
  return { asked, getToken };
}

describe('a getToken that gives no usable token', () => {
  for (const [what, first, message] of [
    ['undefined', undefined, 'getToken must give a string, not undefined'],
    ['an empty string', '', 'getToken must give a string, not an empty one'],
  ] as const) {
    it(`in-band, ${what}: a provider failure, retried with a fresh call`, async () => {
      const { url } = await whoamiJwtGateway(res, true);
      const { asked, getToken } = tokensAfter(first);
      const client = res.client(url, { getToken });
      const events = disconnectsOf(client);
      await client.opened();
      expect(await client.call('whoami')).toBe('alice');
      expect(events).toEqual([{ error: new TypeError(message), willRetry: true }]);
      expect(asked.count).toBe(2);
    });
  }

  it('with the header transport, undefined: a provider failure, not a dial refused 401', async () => {
    const { url } = await whoamiJwtGateway(res, false);
    const { asked, getToken } = tokensAfter(undefined);
    const client = res.client(url, { getToken, tokenTransport: 'header' });
    const events = disconnectsOf(client);
    await client.opened();
    expect(await client.call('whoami')).toBe('alice');
    expect(events).toEqual([
      { error: new TypeError('getToken must give a string, not undefined'), willRetry: true },
    ]);
    expect(asked.count).toBe(2);
  });
});

describe('authenticate() with no usable token', () => {
  it('rejects with the TypeError, sending nothing, for one given or one getToken gives', async () => {
    const { url } = await whoamiJwtGateway(res, true);
    let next: unknown = signHs256();
    const client = res.client(url, { getToken: () => Promise.resolve(next as string) });
    await client.opened();
    await expect(client.authenticate('')).rejects.toEqual(
      new TypeError('getToken must give a string, not an empty one'),
    );
    next = undefined;
    await expect(client.authenticate()).rejects.toEqual(
      new TypeError('getToken must give a string, not undefined'),
    );
    // The session is as it was: nothing reached the server.
    expect(await client.call('whoami')).toBe('alice');
  });
});

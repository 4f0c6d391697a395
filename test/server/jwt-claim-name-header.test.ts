// docs/identity.md, "JWT": `claims` names where the user and the patterns are, and a token that
// lacks one or gives it the wrong shape is refused 401 `missing claim "<name>"` / `malformed
// claim "<name>"`, with that message in WWW-Authenticate's error_description. A claim name may be
// any text (`用户`), which a header cannot carry as it is: the description spells what RFC 6750
// does not allow there percent-encoded (UTF-8), while the body and the in-band -32010 keep the
// message as it is. Not a 500, nor an in-band "unavailable" the client would retry for ever.
import { afterEach, describe, expect, it } from 'vitest';
import { jwtAuth } from '../../src/jwt.js';
import type { JwtContext } from '../../src/jwt.js';
import { Resources } from '../support/resources.js';
import { openRaw, upgradeRefusal } from '../support/sockets.js';
import { SECRET, now, signHs256 } from '../jwt/jwt-fixtures.js';

const res = new Resources();
afterEach(() => res.cleanup());

async function gatewayWithClaimNames() {
  const auth = jwtAuth({
    secret: SECRET,
    claims: { user: '用户', topics: '主题', methods: 'scope%\\x' },
  });
  const running = await res.gateway<JwtContext>({
    ...auth,
    identity: { ...auth.identity, inBand: true },
  });
  running.gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
  return running;
}

const token = (claims: Record<string, unknown>) => signHs256({ exp: now() + 600, ...claims });

describe('jwtAuth with claim names outside printable ASCII', () => {
  it('refuses at the upgrade with 401, the names percent-encoded in WWW-Authenticate', async () => {
    const { url } = await gatewayWithClaimNames();
    const refused = async (claims: Record<string, unknown>) => {
      const r = await upgradeRefusal(res, url, undefined, {
        authorization: `Bearer ${await token(claims)}`,
      });
      return { status: r.status, body: r.body, challenge: r.headers['www-authenticate'] };
    };
    const challenge = (description: string) =>
      `Bearer error="invalid_token", error_description="${description}"`;
    expect(await refused({ sub: 'ann' })).toEqual({
      status: 401,
      body: 'missing claim "用户"\n',
      challenge: challenge('missing claim %E7%94%A8%E6%88%B7'),
    });
    expect(await refused({ 用户: 'ann', 主题: 7 })).toEqual({
      status: 401,
      body: 'malformed claim "主题"\n',
      challenge: challenge('malformed claim %E4%B8%BB%E9%A2%98'),
    });
    expect(await refused({ 用户: 'ann', 'scope%\\x': 7 })).toEqual({
      status: 401,
      body: 'malformed claim "scope%\\x"\n',
      challenge: challenge('malformed claim scope%25%5Cx'),
    });
  });

  it('refuses in-band with -32010 invalid, the message as it is; a token with the claims passes', async () => {
    const { url } = await gatewayWithClaimNames();
    const raw = await openRaw(res, url);
    const missing = await raw.request('rpc.authenticate', { token: await token({ sub: 'ann' }) });
    expect(missing.error).toEqual({
      code: -32010,
      message: 'missing claim "用户"',
      data: { reason: 'invalid', status: 401 },
    });
    const good = await token({ 用户: '安', 主题: ['news.*'] });
    expect((await raw.request('rpc.authenticate', { token: good })).result).toMatchObject({
      user: '安',
    });
    expect((await raw.request('whoami')).result).toBe('安');
  });
});

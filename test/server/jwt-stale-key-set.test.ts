// docs/identity.md, "Key rotation with jwksUrl": a removed key is still taken until the cached
// set is older than jwksCacheMaxAgeMs; "a set past that age that cannot be fetched again refuses
// with 503: keys are not used beyond it". The cooldown after a failed fetch, which spares a
// failing key set server a fetch per token, does not stretch the set's life: past its max age,
// every token is refused 503 until a fetch succeeds, at the upgrade as in jwtAuth itself.
import { createServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { jwtAuth } from '../../src/jwt.js';
import type { JwtContext } from '../../src/jwt.js';
import { listenOnLoopback } from '../support/network.js';
import { sleep } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { upgradeRefusal } from '../support/sockets.js';
import { refusal, signWith, signingKey, withToken } from '../jwt/jwt-fixtures.js';

const res = new Resources();
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await res.cleanup();
  for (const close of closers.splice(0)) await close();
});

describe('jwtAuth with jwksUrl whose server fails once the set is past jwksCacheMaxAgeMs', () => {
  it('refuses with 503 every token within the failed fetch cooldown, not only the one that fetched', async () => {
    const key = await signingKey('ES256', 'k1');
    let failing = false;
    let requests = 0;
    const server = createServer((_req, response) => {
      requests++;
      if (failing) return void response.writeHead(500).end('{}');
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ keys: [key.publicJwk] }));
    });
    const { port, close } = await listenOnLoopback(server);
    closers.push(close);
    const maxAgeMs = 500;
    const auth = jwtAuth({
      jwksUrl: `http://127.0.0.1:${port}/jwks.json`,
      jwksCacheMaxAgeMs: maxAgeMs,
      // Far longer than the test: every token after the failed fetch falls within its cooldown.
      jwksCooldownMs: 600_000,
    });
    const { url } = await res.gateway<JwtContext>({ ...auth });
    expect((await auth.authenticate(withToken(await signWith(key)))).user).toBe('alice');

    failing = true; // the key withdrawn, or the server down: the set must not outlive its age
    await sleep(maxAgeMs + 100);
    const unavailable = { status: 503, message: 'key set unavailable: HTTP 500' };
    // The set is stale: fetched again, and that fetch fails.
    expect(await refusal(auth.authenticate(withToken(await signWith(key))))).toEqual(unavailable);
    // Within that failure's cooldown: the stale set is not used either.
    expect(await refusal(auth.authenticate(withToken(await signWith(key))))).toEqual(unavailable);
    const upgrade = await upgradeRefusal(res, url, undefined, {
      authorization: `Bearer ${await signWith(key)}`,
    });
    expect({ status: upgrade.status, body: upgrade.body }).toEqual({
      status: 503,
      body: 'key set unavailable: HTTP 500\n',
    });
    // The cooldown holds: one fetch for the set, one that failed.
    expect(requests).toBe(2);
  });
});

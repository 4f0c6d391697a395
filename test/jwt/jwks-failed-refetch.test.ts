// docs/identity.md, "Key rotation with jwksUrl": a token whose kid is not in the fetched set
// causes one more fetch, unless the last one is less than jwksCooldownMs old, a fetch that
// failed (the key set server answering 500) included: tokens with unknown kids, which any client
// can make, do not each send a request to a failing key set server. A token whose key the set
// last fetched holds is still verified meanwhile.
import { createServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { jwtAuth } from '../../src/jwt.js';
import { listenOnLoopback } from '../support/network.js';
import { sleep } from '../support/promises.js';
import { refusal, signWith, signingKey, withToken } from './jwt-fixtures.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

describe('jwtAuth with jwksUrl whose server fails after a first good fetch', () => {
  it('fetches the set at most once per jwksCooldownMs however many unknown kids arrive', async () => {
    const known = await signingKey('ES256', 'known');
    let failing = false;
    let requests = 0;
    const server = createServer((_req, res) => {
      requests++;
      if (failing) {
        res.writeHead(500).end('{}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: [known.publicJwk] }));
    });
    const { port, close } = await listenOnLoopback(server);
    closers.push(close);
    const cooldownMs = 4_000;
    const auth = jwtAuth({
      jwksUrl: `http://127.0.0.1:${port}/jwks.json`,
      jwksCooldownMs: cooldownMs,
      jwksCacheMaxAgeMs: 600_000,
    });
    expect((await auth.authenticate(withToken(await signWith(known)))).user).toBe('alice');
    expect(requests).toBe(1);

    failing = true;
    await sleep(cooldownMs + 200); // past the cooldown of the good fetch
    const stranger = await signWith(await signingKey('ES256', 'made-up-kid'));
    const answers: unknown[] = [];
    // 20 tokens one after another: together they take far less than the cooldown.
    for (let i = 0; i < 20; i++)
      answers.push(await refusal(auth.authenticate(withToken(stranger))));
    expect(answers[0]).toEqual({ status: 503, message: 'key set unavailable: HTTP 500' });
    // One fetch past the first (the failed one): the others fall within its cooldown.
    expect({ fetchesForTheFlood: requests - 1 }).toEqual({ fetchesForTheFlood: 1 });
    // The known key still verifies, from the set last fetched, without a fetch.
    expect((await auth.authenticate(withToken(await signWith(known)))).user).toBe('alice');
    expect(requests).toBe(2);
  });
});

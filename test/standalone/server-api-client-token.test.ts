// A serverApi.jwt that verifies with the clients' jwt key is refused when the file is read, with a
// message naming both paths: nothing marks a token as an operator's, so any client's WebSocket
// token would call the server API (publish, disconnectUser, callClient). A serverApi.jwt that
// requires an audience (or issuer) the clients' jwt does not accept is allowed, and a client's
// token is then refused by the server API.
import { generateKeyPairSync } from 'node:crypto';
import { expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { serve } from '../../src/standalone/serve.js';
import { resolveStandaloneConfig } from '../../src/standalone/standalone-config.js';
import { signHs256 } from '../jwt/jwt-fixtures.js';

const SECRET = 'one-secret-for-everything-0123456789abcdef';

it("a client's token is refused by the server API (or the file is)", async () => {
  let config;
  try {
    config = resolveStandaloneConfig({
      listen: { host: '127.0.0.1', port: 0 },
      jwt: { secret: SECRET },
      serverApi: { listen: { host: '127.0.0.1', port: 0 }, jwt: { secret: SECRET } },
    });
  } catch {
    return; // refused: what should apply
  }
  const server = await serve(config, { logger: silentLogger });
  try {
    // What any end user holds to open a WebSocket session.
    const clientToken = await signHs256(
      { sub: 'alice', exp: Math.floor(Date.now() / 1000) + 600 },
      SECRET,
    );
    const response = await fetch(server.serverApiUrl!, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${clientToken}` },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'disconnectUser',
        params: { user: 'bob', denyForMs: 60_000 },
      }),
    });
    const body = await response.text();
    expect(`${response.status} ${body}`).toMatch(/^401 /);
  } finally {
    await server.close();
  }
});

it('refuses one key for both, naming serverApi.jwt.secret and jwt.secret', () => {
  expect(() =>
    resolveStandaloneConfig({
      listen: { host: '127.0.0.1', port: 0 },
      jwt: { secret: SECRET },
      serverApi: { listen: { host: '127.0.0.1', port: 0 }, jwt: { secret: SECRET } },
    }),
  ).toThrow(/serverApi\.jwt\.secret is the same key as jwt\.secret/);
  expect(() =>
    resolveStandaloneConfig({
      listen: { host: '127.0.0.1', port: 0 },
      jwt: { jwksUrl: 'https://idp.example/jwks.json' },
      serverApi: {
        listen: { host: '127.0.0.1', port: 0 },
        jwt: { jwksUrl: 'https://idp.example/jwks.json', audience: 'ops' },
      },
    }),
  ).toThrow(/serverApi\.jwt\.jwksUrl is the same key as jwt\.jwksUrl/);
});

it("accepts one key when serverApi.jwt requires an audience the clients' jwt does not", async () => {
  const config = resolveStandaloneConfig({
    listen: { host: '127.0.0.1', port: 0 },
    jwt: { secret: SECRET, audience: 'app' },
    serverApi: {
      listen: { host: '127.0.0.1', port: 0 },
      jwt: { secret: SECRET, audience: 'ops' },
    },
  });
  const server = await serve(config, { logger: silentLogger });
  try {
    const exp = Math.floor(Date.now() / 1000) + 600;
    const post = async (token: string): Promise<number> => {
      const response = await fetch(server.serverApiUrl!, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'disconnectUser',
          params: { user: 'bob' },
        }),
      });
      await response.text();
      return response.status;
    };
    expect(await post(await signHs256({ sub: 'alice', aud: 'app', exp }, SECRET))).toBe(401);
    expect(await post(await signHs256({ sub: 'ops', aud: 'ops', exp }, SECRET))).toBe(200);
  } finally {
    await server.close();
  }
});

it('refuses one key given in two forms: a PEM and a JWK, a public key and a set holding it', () => {
  const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'k1', alg: 'ES256', use: 'sig' };
  const forms: [string, Record<string, unknown>, string, Record<string, unknown>][] = [
    ['publicKey', { publicKey: pem }, 'publicKey', { publicKey: jwk }],
    ['publicKey', { publicKey: pem }, 'jwks', { jwks: { keys: [jwk] } }],
    ['jwks', { jwks: { keys: [jwk] } }, 'publicKey', { publicKey: pem }],
  ];
  for (const [clientsSource, clients, apiSource, api] of forms) {
    expect(() =>
      resolveStandaloneConfig({
        listen: { host: '127.0.0.1', port: 0 },
        jwt: clients,
        serverApi: { listen: { host: '127.0.0.1', port: 0 }, jwt: api },
      }),
    ).toThrow(`serverApi.jwt.${apiSource} is the same key as jwt.${clientsSource}`);
  }
});

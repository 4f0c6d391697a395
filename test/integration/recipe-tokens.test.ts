/**
 * docs/recipes/tokens.md runs as written. Each TypeScript block starts with the file it is
 * (`// keys.ts (key set)`: keys.ts, in the key-set variant); the files of one variant are written
 * out side by side and bundled against this source tree (`wsrpc-gateway` is src/index.ts,
 * `wsrpc-gateway/client` src/client/index.ts, jose and ws the installed packages). server.ts
 * runs as a process; tokens.ts, issue.ts, node-client.ts and browser.ts run here, against it,
 * over real WebSockets.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { SignJWT, generateKeyPair } from 'jose';
import type { CryptoKey, JWK, JWTPayload } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { RpcClient } from '../../src/client/client.js';
import { root, spawnServer, waitForLivez } from '../support/demo-process.js';
import { freePort } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { attemptUpgrade, closeOf, openSocket, upgradeRefusal } from '../support/sockets.js';
import { waitUntil, within } from '../support/waiting.js';
import { thisPackage } from '../support/bundle.js';

const res = new Resources();
afterEach(() => res.cleanup());

// Under node_modules, so the bundles' bare imports (jose, ws, rxjs...) resolve as installed.
const outDir = join(root, 'node_modules', '.cache', `wsrpc-recipe-tokens-${process.pid}`);
afterAll(() => rmSync(outDir, { recursive: true, force: true }));

/** The page's TypeScript blocks by the file each one names, variant included. */
function recipeBlocks(): Map<string, string> {
  const markdown = readFileSync(join(root, 'docs', 'recipes', 'tokens.md'), 'utf8');
  const blocks = new Map<string, string>();
  for (const [, code] of markdown.matchAll(/```ts\n([\s\S]*?)```/g)) {
    const name = /^\/\/ ([\w-]+\.ts(?: \([^)]+\))?)/.exec(code!)?.[1];
    if (!name) throw new Error(`a ts block of docs/recipes/tokens.md names no file:\n${code}`);
    blocks.set(name, code!);
  }
  return blocks;
}

/** One variant's files written side by side, and each entry bundled: its path by file name. */
async function bundleVariant(variant: 'key set' | 'shared secret'): Promise<Map<string, string>> {
  const blocks = recipeBlocks();
  const dir = join(outDir, variant.replace(' ', '-'));
  mkdirSync(dir, { recursive: true });
  const files = [
    'tokens.ts',
    `keys.ts (${variant})`,
    `issue.ts (${variant})`,
    'server.ts',
    'node-client.ts',
    'browser.ts',
  ];
  for (const name of files) {
    const code = blocks.get(name);
    if (code === undefined) throw new Error(`docs/recipes/tokens.md has no block "// ${name}"`);
    writeFileSync(join(dir, name.replace(/ \(.*\)$/, '')), code);
  }
  const entries = ['server', 'tokens', 'issue', 'node-client', 'browser'];
  await build({
    entryPoints: entries.map((entry) => join(dir, `${entry}.ts`)),
    outdir: join(dir, 'out'),
    outExtension: { '.js': '.mjs' },
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    logLevel: 'silent',
    plugins: [thisPackage],
  });
  return new Map(entries.map((entry) => [entry, join(dir, 'out', `${entry}.mjs`)]));
}

interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}
interface TokensModule {
  ISSUER: string;
  AUDIENCE: string;
}
interface KeySetIssuer {
  newSigningKey(kid: string): Promise<SigningKey>;
  issueToken(key: SigningKey, user: string, scopes: string[], lifetime?: string): Promise<string>;
}
interface SecretIssuer {
  issueToken(user: string, scopes: string[], lifetime?: string): Promise<string>;
}
interface ClientModule {
  connectWithToken(url: string, getToken: () => string): RpcClient;
}
interface Whoami {
  user: string;
  scopes: string[];
  expiresAt: number;
}

function load<T>(file: string | undefined): Promise<T> {
  return import(pathToFileURL(file!).href) as Promise<T>;
}

/** The recipe's server.ts as a process, once it answers /livez; its caller ends it. */
async function startServer(file: string, env: Record<string, string>) {
  const port = await freePort();
  const server = spawnServer(file, port, env);
  await waitForLivez(server.child, `http://127.0.0.1:${port}`);
  return { ...server, url: `ws://127.0.0.1:${port}/rpc` };
}

function track(client: RpcClient): RpcClient {
  res.clients.push(client);
  return client;
}

describe('docs/recipes/tokens.md, keys.ts (key set)', () => {
  let modules: Map<string, string>;
  let claims: TokensModule;
  let issuer: KeySetIssuer;
  let nodeClient: ClientModule;
  let server: Awaited<ReturnType<typeof startServer>>;
  let jwksFile: string;
  let current: SigningKey;

  const writeKeySet = (...keys: SigningKey[]) =>
    writeFileSync(jwksFile, JSON.stringify({ keys: keys.map((key) => key.publicJwk) }));
  /** Signal the process to read its key set again, and wait for its line about it. */
  const reloadKeys = async (expectLine: RegExp) => {
    const before = server
      .output()
      .split('\n')
      .filter((line) => expectLine.test(line)).length;
    server.child.kill('SIGHUP');
    await waitUntil(
      () =>
        server
          .output()
          .split('\n')
          .filter((line) => expectLine.test(line)).length > before,
      `a line matching ${expectLine} after SIGHUP`,
    );
  };
  const withBearer = (token: string) =>
    attemptUpgrade(res, server.url, { headers: { authorization: `Bearer ${token}` } });
  /** A token with exactly these claims, signed with `key` (ES256, its kid). */
  const signed = (key: SigningKey, payload: JWTPayload) =>
    new SignJWT(payload).setProtectedHeader({ alg: 'ES256', kid: key.kid }).sign(key.privateKey);
  const validClaims = (): JWTPayload => ({
    iss: claims.ISSUER,
    aud: claims.AUDIENCE,
    sub: 'alice',
    exp: Math.floor(Date.now() / 1000) + 600,
  });

  beforeAll(async () => {
    modules = await bundleVariant('key set');
    claims = await load<TokensModule>(modules.get('tokens'));
    issuer = await load<KeySetIssuer>(modules.get('issue'));
    nodeClient = await load<ClientModule>(modules.get('node-client'));
    jwksFile = join(outDir, 'jwks.json');
    current = await issuer.newSigningKey('2025-01');
    writeKeySet(current);
    server = await startServer(modules.get('server')!, { JWKS_FILE: jwksFile });
  }, 60_000);

  afterAll(async () => {
    // SIGTERM: the recipe drains and the process exits by itself.
    if (server === undefined || server.child.exitCode !== null) return;
    server.child.kill('SIGTERM');
    const { code, signal } = await server.exited;
    expect({ code, signal, output: code === 0 ? '' : server.output() }).toEqual({
      code: 0,
      signal: null,
      output: '',
    });
  });

  it('a valid token: the identity reaches the handlers, scopes decide each method, notifyUser finds the user', async () => {
    const reader = await issuer.issueToken(current, 'alice', ['orders:read']);
    const alice = track(nodeClient.connectWithToken(server.url, () => reader));
    const whoami = (await alice.call('whoami')) as Whoami;
    expect(whoami).toEqual({
      user: 'alice',
      scopes: ['orders:read'],
      expiresAt: expect.any(Number),
    });
    expect(whoami.expiresAt - Date.now()).toBeGreaterThan(14 * 60_000);
    expect(await alice.call('orders.list')).toEqual([{ id: 'o-1', status: 'open' }]);
    await expect(alice.call('orders.cancel', ['o-1'])).rejects.toMatchObject({ code: -32004 });

    // Alice's other session, allowed to write: its cancel reaches every session of alice.
    const writer = await issuer.issueToken(current, 'alice', ['orders:read', 'orders:write']);
    const aliceElsewhere = track(nodeClient.connectWithToken(server.url, () => writer));
    const changed: unknown[] = [];
    alice.notificationsOf('orders.changed').subscribe((order) => changed.push(order));
    expect(await aliceElsewhere.call('orders.cancel', ['o-1'])).toEqual({
      id: 'o-1',
      status: 'cancelled',
    });
    await waitUntil(() => changed.length === 1, 'orders.changed at alice');
    expect(changed).toEqual([{ id: 'o-1', status: 'cancelled' }]);
  });

  it('refuses with 401 a missing, expired, foreign, unsigned or unknown-key token', async () => {
    const impostor = await issuer.newSigningKey(current.kid); // same kid, another key
    const stranger = await issuer.newSigningKey('not-in-the-set');
    const hmac = new SignJWT(validClaims())
      .setProtectedHeader({ alg: 'HS256', kid: current.kid })
      .sign(new TextEncoder().encode('x'.repeat(32)));
    const past = Math.floor(Date.now() / 1000) - 60;
    const noExpiry = { ...validClaims(), exp: undefined };
    const outcomes = {
      valid: await withBearer(await signed(current, validClaims())),
      expired: await withBearer(await signed(current, { ...validClaims(), exp: past })),
      noExpiry: await withBearer(await signed(current, noExpiry)),
      otherAudience: await withBearer(
        await signed(current, { ...validClaims(), aud: 'https://other.example.com' }),
      ),
      otherIssuer: await withBearer(
        await signed(current, { ...validClaims(), iss: 'https://evil.example.com' }),
      ),
      unknownKid: await withBearer(await issuer.issueToken(stranger, 'alice', [])),
      badSignature: await withBearer(await issuer.issueToken(impostor, 'alice', [])),
      otherAlgorithm: await withBearer(await hmac),
      notAJwt: await withBearer('not-a-jwt'),
      none: await attemptUpgrade(res, server.url),
    };
    expect(outcomes).toEqual({
      valid: 'open',
      expired: 401,
      noExpiry: 401,
      otherAudience: 401,
      otherIssuer: 401,
      unknownKid: 401,
      badSignature: 401,
      otherAlgorithm: 401,
      notAJwt: 401,
      none: 401,
    });
    const refusal = await upgradeRefusal(res, server.url, undefined, {
      authorization: `Bearer ${await signed(current, { ...validClaims(), exp: past })}`,
    });
    expect(refusal).toMatchObject({
      status: 401,
      body: 'Invalid token\n',
      headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
    });
  });

  it('rotates keys: a new kid is taken once the key set has it, the old one refused once removed', async () => {
    const next = await issuer.newSigningKey('2025-02');
    const byNext = await issuer.issueToken(next, 'alice', []);
    const byOld = await issuer.issueToken(current, 'alice', []);
    expect(await withBearer(byNext)).toBe(401);

    writeKeySet(current, next);
    await reloadKeys(/jwks\.json: 2 keys/);
    expect({ byNext: await withBearer(byNext), byOld: await withBearer(byOld) }).toEqual({
      byNext: 'open',
      byOld: 'open',
    });

    // A file that is not a key set: the keys already loaded stay.
    writeFileSync(jwksFile, '{"keys": [');
    await reloadKeys(/not reloaded/);
    expect(await withBearer(byNext)).toBe('open');

    writeKeySet(next);
    await reloadKeys(/jwks\.json: 1 keys/);
    expect({ byNext: await withBearer(byNext), byOld: await withBearer(byOld) }).toEqual({
      byNext: 'open',
      byOld: 401,
    });
    current = next;
  });

  it('a browser: the token as a second subprotocol, never echoed back', async () => {
    const token = await issuer.issueToken(current, 'bob', ['orders:read']);
    const socket = await openSocket(res, server.url, ['jsonrpc-2.0', `token.${token}`]);
    expect(socket.protocol).toBe('jsonrpc-2.0');

    // browser.ts extends the global WebSocket: `ws`'s stands in for a browser's.
    const browser = await load<ClientModule>(modules.get('browser'));
    const global = globalThis as { WebSocket?: unknown };
    const previous = global.WebSocket;
    global.WebSocket = WebSocket;
    try {
      const client = track(browser.connectWithToken(server.url, () => token));
      expect(((await client.call('whoami')) as Whoami).user).toBe('bob');
    } finally {
      global.WebSocket = previous;
    }
  });

  it('a cookie: taken from an allowed origin, 403 from any other', async () => {
    const token = await issuer.issueToken(current, 'carol', []);
    const cookie = `__Host-token=${token}`;
    const from = (origin: string) =>
      attemptUpgrade(res, server.url, { headers: { cookie, origin } });
    expect({
      app: await from('https://app.example.com'),
      elsewhere: await from('https://evil.example.com'),
    }).toEqual({ app: 'open', elsewhere: 403 });
  });

  it('closes a session with 4001 when its token expires; the client dials again with a fresh one', async () => {
    const shortLived = await issuer.issueToken(current, 'dave', [], '3s');
    const raw = await openSocket(res, server.url, undefined, {
      headers: { authorization: `Bearer ${shortLived}` },
    });

    let token = shortLived;
    let dials = 0;
    const client = track(
      nodeClient.connectWithToken(server.url, () => {
        dials++;
        return token;
      }),
    );
    const first = (await client.call('whoami')) as Whoami;
    token = await issuer.issueToken(current, 'dave', [], '15m'); // the app refreshed it

    expect(await within(closeOf(raw), 'the close at expiry')).toEqual({
      code: 4001,
      reason: 'token expired',
    });
    expect(Date.now()).toBeGreaterThan(first.expiresAt - 100);
    await waitUntil(() => dials >= 2, 'a second dial', 10_000);
    const second = (await client.call('whoami')) as Whoami;
    expect(second.user).toBe('dave');
    expect(second.expiresAt - first.expiresAt).toBeGreaterThan(10 * 60_000);
  });
});

describe('docs/recipes/tokens.md, keys.ts (shared secret)', () => {
  let modules: Map<string, string>;

  beforeAll(async () => {
    modules = await bundleVariant('shared secret');
  }, 60_000);

  it('verifies HS256 tokens signed with TOKEN_SECRET, and only those', async () => {
    const secret = 'a-secret-of-32-characters-or-more-0123';
    const server = await startServer(modules.get('server')!, { TOKEN_SECRET: secret });
    res.children.push(server.child);
    process.env.TOKEN_SECRET = secret; // issue.ts reads it too, through keys.ts
    let issuer: SecretIssuer;
    try {
      issuer = await load<SecretIssuer>(modules.get('issue'));
    } finally {
      delete process.env.TOKEN_SECRET;
    }
    const { ISSUER, AUDIENCE } = await load<TokensModule>(modules.get('tokens'));
    const nodeClient = await load<ClientModule>(modules.get('node-client'));

    const token = await issuer.issueToken('erin', ['orders:read']);
    const client = track(nodeClient.connectWithToken(server.url, () => token));
    expect(((await client.call('whoami')) as Whoami).user).toBe('erin');

    const claims = { iss: ISSUER, aud: AUDIENCE, sub: 'erin' };
    const otherSecret = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode('another-secret-of-32-characters-0123'));
    const es256 = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256' })
      .setExpirationTime('5m')
      .sign((await generateKeyPair('ES256')).privateKey);
    const withBearer = (bearer: string) =>
      attemptUpgrade(res, server.url, { headers: { authorization: `Bearer ${bearer}` } });
    expect({
      otherSecret: await withBearer(otherSecret),
      otherAlgorithm: await withBearer(es256),
    }).toEqual({ otherSecret: 401, otherAlgorithm: 401 });

    server.child.kill('SIGTERM');
    expect((await server.exited).code).toBe(0);
  });

  it('refuses to start without a TOKEN_SECRET of 32 characters', async () => {
    const { child, exited, output } = spawnServer(modules.get('server')!, await freePort(), {
      TOKEN_SECRET: 'short',
    });
    res.children.push(child);
    expect((await within(exited, 'the process to exit')).code).not.toBe(0);
    expect(output()).toContain('TOKEN_SECRET must be set, 32 characters or more');
  });
});

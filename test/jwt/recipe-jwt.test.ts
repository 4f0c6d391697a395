/**
 * docs/recipes/tokens.md, "The short way: jwtAuth", runs as written: its `server-jwt.ts` block and
 * the page's `tokens.ts`, bundled against this source tree (`wsrpc-gateway` is src/index.ts,
 * `wsrpc-gateway/jwt` src/jwt.ts), run as a process whose key set is served by a local HTTP server.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { RpcClient } from '../../src/client/client.js';
import { root, spawnServer, waitForLivez } from '../support/demo-process.js';
import { freePort, listenOnLoopback } from '../support/network.js';
import { killChild } from '../support/processes.js';
import { openRaw, upgradeRefusal } from '../support/sockets.js';
import { Resources } from '../support/resources.js';
import { now, signWith, signingKey, validClaims } from './jwt-fixtures.js';
import type { SigningKey } from './jwt-fixtures.js';
import { thisPackage } from '../support/bundle.js';

const res = new Resources();
// Under node_modules, so the bundle's bare imports (jose, ws, rxjs...) resolve as installed.
const outDir = join(root, 'node_modules', '.cache', `wsrpc-recipe-jwt-${process.pid}`);

/** The page's TypeScript blocks by the file each one names. */
function recipeBlock(name: string): string {
  const markdown = readFileSync(join(root, 'docs', 'recipes', 'tokens.md'), 'utf8');
  for (const [, code] of markdown.matchAll(/```ts\n([\s\S]*?)```/g)) {
    if (code!.startsWith(`// ${name}\n`)) return code!;
  }
  throw new Error(`docs/recipes/tokens.md has no block "// ${name}"`);
}

async function bundleServer(): Promise<string> {
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'tokens.ts'), recipeBlock('tokens.ts'));
  writeFileSync(join(outDir, 'server-jwt.ts'), recipeBlock('server-jwt.ts'));
  const outfile = join(outDir, 'server-jwt.mjs');
  await build({
    entryPoints: [join(outDir, 'server-jwt.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    logLevel: 'silent',
    plugins: [thisPackage],
  });
  return outfile;
}

describe('docs/recipes/tokens.md, server-jwt.ts', () => {
  let key: SigningKey;
  let url: string;
  let stop: () => Promise<void>;
  // tokens.ts's ISSUER and AUDIENCE.
  const claims = (extra = {}) =>
    validClaims({
      iss: 'https://login.example.com',
      aud: 'https://api.example.com/rpc',
      scope: 'orders:read',
      ...extra,
    });

  beforeAll(async () => {
    key = await signingKey('ES256', '2025-01');
    const jwks = createServer((_req, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ keys: [key.publicJwk] }));
    });
    const listening = await listenOnLoopback(jwks);
    const jwksUrl = `http://127.0.0.1:${listening.port}/jwks.json`;
    const port = await freePort();
    const server = spawnServer(await bundleServer(), port, { JWKS_URL: jwksUrl });
    await waitForLivez(server.child, `http://127.0.0.1:${port}`);
    url = `ws://127.0.0.1:${port}/rpc`;
    stop = async () => {
      await killChild(server.child);
      await listening.close();
    };
  }, 60_000);

  afterAll(async () => {
    await res.cleanup();
    await stop?.();
    rmSync(outDir, { recursive: true, force: true });
  });

  it('a Bearer token: the identity and its scopes reach the handler', async () => {
    const token = await signWith(key, claims());
    class Bearer extends WebSocket {
      constructor(address: string, protocols?: string | string[]) {
        super(address, protocols, { headers: { authorization: `Bearer ${token}` } });
      }
    }
    const client = new RpcClient({ url, WebSocket: Bearer });
    res.clients.push(client);
    expect(await client.call('whoami')).toEqual({
      user: 'alice',
      scopes: ['orders:read'],
      expiresAt: expect.any(Number),
    });
  });

  it('a browser: the token as a token.<jwt> subprotocol, or in-band', async () => {
    const token = await signWith(key, claims({ sub: 'bob' }));
    const socket = res.track(new WebSocket(url, ['jsonrpc-2.0', `token.${token}`]));
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    expect(socket.protocol).toBe('jsonrpc-2.0');

    const raw = await openRaw(res, url);
    expect((await raw.request('rpc.authenticate', { token })).result).toMatchObject({
      user: 'bob',
    });
    expect((await raw.request('whoami')).result).toMatchObject({ user: 'bob' });
  });

  it('an expired token: 401 saying so', async () => {
    const expired = await signWith(key, claims({ exp: now() - 600 }));
    const refusal = await upgradeRefusal(res, url, undefined, {
      authorization: `Bearer ${expired}`,
    });
    expect({ status: refusal.status, body: refusal.body }).toEqual({
      status: 401,
      body: 'token expired\n',
    });
  });
});

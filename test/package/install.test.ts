// The package as a user gets it: `npm pack` of the built work tree, installed into an empty
// project with the Node and npm running this test. The install prints no warning (no dependency
// declares an engine this Node does not meet); the main entry imports without ioredis, NATS or
// jose installed, and "./redis", "./nats" and "./jwt" fail naming the missing peer until it is
// installed; so do "./msgpack" and "./cbor", and a gateway with those encodings on.
// It downloads the package's dependencies from the registry: skipped when the registry cannot be
// reached. Run `npm run build` first.
import { spawnSync } from 'node:child_process';
import type { SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/**
 * The environment without what `npm test` passes down to its scripts (npm_config_local_prefix,
 * npm_package_*, npm_lifecycle_*...), which would make the nested npm act on this repository.
 * Where the registry and the cache are stays.
 */
function cleanEnv(): NodeJS.ProcessEnv {
  const keep = new Set([
    'npm_config_registry',
    'npm_config_cache',
    'npm_config_userconfig',
    'npm_config_globalconfig',
  ]);
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^npm_/i.test(key) && !keep.has(key.toLowerCase())) continue;
    env[key] = value;
  }
  return { ...env, NO_UPDATE_NOTIFIER: '1' };
}
const env = cleanEnv();

function run(
  command: string,
  args: string[],
  cwd: string,
  timeout = 45_000,
): SpawnSyncReturns<string> {
  return spawnSync(command, args, { cwd, env, encoding: 'utf8', timeout });
}

/** `npm install ...` in `cwd`: its whole output, after checking it succeeded. */
function npmInstall(cwd: string, specs: string[]): string {
  const out = run(npm, ['install', ...specs, '--no-audit', '--no-fund'], cwd);
  const output = `${out.stdout}${out.stderr}`;
  expect(out.status, output).toBe(0);
  return output;
}

/** Runs an ES module snippet with Node in `cwd`. */
function node(cwd: string, code: string): SpawnSyncReturns<string> {
  return run(process.execPath, ['--input-type=module', '-e', code], cwd, 20_000);
}

const warnings = (output: string): string[] =>
  output.split('\n').filter((line) => /^npm (warn|WARN|error|ERR)/.test(line));

/** The registry answers within 5 s: `npm ping`. */
function registryReachable(): boolean {
  const ping = run(npm, ['ping', '--fetch-retries=0', '--fetch-timeout=5000'], root, 10_000);
  return ping.status === 0;
}

/** The version of `name` that this repository's lockfile pins. */
function lockedVersion(name: string): string {
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version: string }>;
  };
  return lock.packages[`node_modules/${name}`]!.version;
}

/**
 * Type-check `source` as app.ts in a folder of its own under the consumer (an ES module package),
 * a CommonJS package when `commonJs`, with `compilerOptions` (JSON members); expects tsc to pass
 * without a word.
 */
function expectTypesCheck(source: string, compilerOptions: string, commonJs: boolean): void {
  const dir = mkdtempSync(join(project, 'ts-'));
  if (commonJs) writeFileSync(join(dir, 'package.json'), '{ "type": "commonjs" }');
  writeFileSync(join(dir, 'app.ts'), source);
  writeFileSync(
    join(dir, 'tsconfig.json'),
    `{ "compilerOptions": { ${compilerOptions}, "target": "es2022", "strict": true,
       "noEmit": true }, "files": ["app.ts"] }`,
  );
  const tsc = join(root, 'node_modules/typescript/bin/tsc');
  const out = run(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], dir, 60_000);
  expect(out.stdout + out.stderr).toBe('');
  expect(out.status).toBe(0);
}

const reachable = registryReachable();
const work = mkdtempSync(join(tmpdir(), 'package-install-'));
const project = join(work, 'project');
let tarball = '';

beforeAll(() => {
  if (!reachable) return;
  expect(existsSync(join(root, 'dist/src/index.js')), 'dist/ is missing: npm run build').toBe(true);
  const pack = run(npm, ['pack', '--json', '--pack-destination', work], root);
  expect(pack.status, pack.stderr).toBe(0);
  const [packed] = JSON.parse(pack.stdout) as { filename: string; files: { path: string }[] }[];
  tarball = join(work, packed!.filename);
  mkdirSync(project);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }),
  );
}, 60_000);
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe.skipIf(!reachable)('the packed package, installed into an empty project', () => {
  it('installs without a warning, with neither ioredis nor NATS', () => {
    const output = npmInstall(project, [tarball]);
    expect(warnings(output), output).toEqual([]);
    const installed = join(project, 'node_modules');
    expect(existsSync(join(installed, 'wsrpc-gateway/LICENSE'))).toBe(true);
    expect(existsSync(join(installed, 'ioredis'))).toBe(false);
    expect(existsSync(join(installed, '@nats-io'))).toBe(false);
    expect(existsSync(join(installed, 'zod'))).toBe(false);
    expect(existsSync(join(installed, 'jose'))).toBe(false);
  }, 60_000);

  it('imports its main, client and protocol entries; a source map carries its sources', () => {
    const out = node(
      project,
      `const main = await import('wsrpc-gateway');
       const client = await import('wsrpc-gateway/client');
       const protocol = await import('wsrpc-gateway/protocol');
       const { readFileSync } = await import('node:fs');
       const map = JSON.parse(readFileSync('node_modules/wsrpc-gateway/dist/src/index.js.map', 'utf8'));
       console.log(JSON.stringify({
         gateway: typeof main.createGateway,
         brokerFromEnv: typeof main.brokerFromEnv,
         redisInMain: 'RedisBroker' in main || 'NatsBroker' in main,
         client: typeof client.createClient,
         protocol: typeof protocol.parseFrame,
         sources: map.sources.length === map.sourcesContent?.length,
       }));`,
    );
    expect(out.stderr).toBe('');
    expect(JSON.parse(out.stdout)).toEqual({
      gateway: 'function',
      brokerFromEnv: 'function',
      redisInMain: false,
      client: 'function',
      protocol: 'function',
      sources: true,
    });
  });

  it('a CommonJS module requires every entry that needs no peer, gets the very modules import gives, and serves a call', () => {
    // A `.cjs` file is CommonJS whatever the project's "type": it loads the package through
    // require(), as an Express or NestJS app compiled to CommonJS does.
    writeFileSync(
      join(project, 'consumer.cjs'),
      `const entries = ['wsrpc-gateway', 'wsrpc-gateway/client', 'wsrpc-gateway/protocol',
         'wsrpc-gateway/client/browser', 'wsrpc-gateway/client/shared', 'wsrpc-gateway/standalone'];
       const { createGateway, silentLogger, JsonRpcError } = require('wsrpc-gateway');
       const { createClient } = require('wsrpc-gateway/client');
       const { WebSocket } = require('ws');
       (async () => {
         const required = entries.map((entry) => Object.keys(require(entry)).length > 0);
         const imported = await import('wsrpc-gateway');
         const gateway = createGateway({ logger: silentLogger });
         gateway.method('sum', ([a, b]) => a + b);
         const { port } = await gateway.listen(0, '127.0.0.1');
         const client = createClient({ url: 'ws://127.0.0.1:' + port + '/rpc', WebSocket });
         const sum = await client.call('sum', [2, 3]);
         const refused = await client.call('nope').catch((err) => err instanceof JsonRpcError && err.code);
         await client.close();
         await gateway.close();
         console.log(JSON.stringify({
           required,
           sameModule: imported.createGateway === createGateway && imported.JsonRpcError === JsonRpcError,
           sum,
           refused,
           files: [
             require.resolve('wsrpc-gateway/shared-worker.js').endsWith('/dist/browser/shared-worker.js'),
             require('wsrpc-gateway/package.json').name,
           ],
         }));
       })().catch((err) => { console.error(err); process.exit(1); });`,
    );
    const out = run(process.execPath, ['consumer.cjs'], project, 20_000);
    expect(out.stderr).toBe('');
    expect(JSON.parse(out.stdout)).toEqual({
      required: [true, true, true, true, true, true],
      sameModule: true,
      sum: 5,
      refused: -32601,
      files: [true, 'wsrpc-gateway'],
    });
  });

  for (const [kind, options] of [
    // What NestJS and older TypeScript projects use; TypeScript 6 deprecates it.
    [
      'module commonjs, moduleResolution node10',
      '"module": "commonjs", "moduleResolution": "node10", "ignoreDeprecations": "6.0"',
    ],
    ['module nodenext, in a CommonJS package', '"module": "nodenext"'],
  ] as const) {
    it(`its types check in a CommonJS TypeScript project (${kind})`, () => {
      const types = join(root, 'node_modules/@types');
      expectTypesCheck(
        `import { createGateway, silentLogger, JsonRpcError } from 'wsrpc-gateway';
         import { createClient } from 'wsrpc-gateway/client';
         import type { Params } from 'wsrpc-gateway/protocol';
         import { RedisBroker } from 'wsrpc-gateway/redis';
         const gateway = createGateway({ logger: silentLogger });
         gateway.method('next', (params: Params) => (params as number[])[0]! + 1);
         const result: Promise<unknown> = createClient({ url: 'ws://127.0.0.1:1/rpc' }).call('next', [1]);
         export { result, JsonRpcError, RedisBroker };`,
        `${options}, "skipLibCheck": true, "types": ["node"], "typeRoots": [${JSON.stringify(types)}]`,
        true,
      );
    }, 60_000);
  }

  it('its declarations check with skipLibCheck off and only the types it installs (@types/ws among its dependencies)', () => {
    // The consumer's own node_modules/@types alone: what installing the package brought.
    const types = join(project, 'node_modules/@types');
    expectTypesCheck(
      `import { createGateway, silentLogger } from 'wsrpc-gateway';
       import { createClient } from 'wsrpc-gateway/client';
       const gateway = createGateway({ logger: silentLogger });
       export const client = createClient({ url: 'ws://127.0.0.1:1/rpc' });
       export { gateway };`,
      `"module": "nodenext", "skipLibCheck": false, "typeRoots": [${JSON.stringify(types)}]`,
      false,
    );
  }, 60_000);

  it('the wsrpc-gateway command checks a configuration file as installed (yaml and undici are dependencies)', () => {
    const file = join(project, 'gateway.yaml');
    writeFileSync(
      file,
      'listen: { port: 8080 }\nupstreams:\n  orders: { url: "http://127.0.0.1:9/rpc" }\nmethods:\n  "orders.*": orders\n',
    );
    const bin = join(project, 'node_modules/.bin/wsrpc-gateway');
    const good = run(bin, ['check-config', file], project, 20_000);
    expect(good.stderr).toBe('');
    expect(good.status).toBe(0);
    expect(good.stdout).toMatch(/^ok/);
    writeFileSync(file, 'listen: { port: -1 }\n');
    const bad = run(bin, ['check-config', file], project, 20_000);
    expect(bad.status).toBe(1);
    expect(bad.stdout + bad.stderr).toContain('listen.port');
  });

  it('"./redis", "./nats" and "./jwt" fail naming the missing peer; so does brokerFromEnv', () => {
    const redis = node(project, `await import('wsrpc-gateway/redis');`);
    expect(redis.status).not.toBe(0);
    expect(redis.stderr).toContain("Cannot find package 'ioredis'");
    const nats = node(project, `await import('wsrpc-gateway/nats');`);
    expect(nats.status).not.toBe(0);
    expect(nats.stderr).toMatch(/Cannot find package '@nats-io\/(transport-node|jetstream)'/);
    const jwt = node(project, `await import('wsrpc-gateway/jwt');`);
    expect(jwt.status).not.toBe(0);
    expect(jwt.stderr).toContain("Cannot find package 'jose'");
    const fromEnv = node(
      project,
      `const { brokerFromEnv } = await import('wsrpc-gateway');
       for (const BROKER of ['redis', 'nats']) {
         await brokerFromEnv({ BROKER }).then(() => console.log('resolved'), (err) => console.log(err.message));
       }`,
    );
    const [redisError, natsError] = fromEnv.stdout.trim().split('\n');
    expect(redisError).toBe(
      'BROKER=redis needs ioredis, an optional peer dependency of wsrpc-gateway: npm install ioredis',
    );
    expect(natsError).toMatch(
      /^BROKER=nats needs @nats-io\/(transport-node|jetstream), an optional peer dependency of wsrpc-gateway: npm install @nats-io\/transport-node @nats-io\/jetstream$/,
    );
  });

  it('"./msgpack" and "./cbor" fail naming their missing package; so does a gateway with them on', () => {
    const msgpack = node(project, `await import('wsrpc-gateway/msgpack');`);
    expect(msgpack.status).not.toBe(0);
    expect(msgpack.stderr).toContain("Cannot find package 'msgpackr'");
    const cbor = node(project, `await import('wsrpc-gateway/cbor');`);
    expect(cbor.status).not.toBe(0);
    expect(cbor.stderr).toContain("Cannot find package 'cbor-x'");
    const gateway = node(
      project,
      `const { createGateway, silentLogger } = await import('wsrpc-gateway');
       const gateway = createGateway({ encodings: ['json', 'cbor'], logger: silentLogger });
       await gateway.listen(0).then(() => console.log('listening'), (err) => console.log(err.message));
       process.exit(0);`,
    );
    expect(gateway.stdout).toMatch(
      /^encodings: 'cbor' needs the package cbor-x \(npm install cbor-x\): Cannot find package 'cbor-x'/,
    );
  });

  it('with ioredis, the NATS packages and jose installed too (still no warning), "./redis", "./nats" and "./jwt" load', () => {
    const peers = ['ioredis', '@nats-io/transport-node', '@nats-io/jetstream', 'jose'];
    const output = npmInstall(
      project,
      peers.map((name) => `${name}@${lockedVersion(name)}`),
    );
    expect(warnings(output), output).toEqual([]);
    const out = node(
      project,
      `const { RedisBroker } = await import('wsrpc-gateway/redis');
       const { NatsBroker } = await import('wsrpc-gateway/nats');
       const { jwtAuth } = await import('wsrpc-gateway/jwt');
       console.log(typeof RedisBroker.create, typeof NatsBroker.connect, typeof jwtAuth);`,
    );
    expect(out.stderr).toBe('');
    expect(out.stdout.trim()).toBe('function function function');
  }, 60_000);
});

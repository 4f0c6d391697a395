// What each package entry loads, read from the built dist (run `npm run build` first): the main,
// client and protocol entries never load the Redis or NATS clients, which only the "./redis" and
// "./nats" entries need, at run time (every module a fresh Node process resolves while importing
// the entry) and in their types (every .d.ts the entry's types reach).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  exports: Record<string, { types: string; default: string }>;
};
// The optional peers: the broker clients and jose (the JWT entry's).
const brokerClients = /^(ioredis|@ioredis\/|@nats-io\/|jose$)/;
const scratch = mkdtempSync(join(tmpdir(), 'lean-imports-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/**
 * The packages (names under node_modules) that importing `file` loads in a fresh Node process:
 * ES modules as a resolve hook sees them, CommonJS ones from require.cache.
 */
function packagesLoadedBy(file: string): string[] {
  const log = join(scratch, `resolved-${Math.random().toString(36).slice(2)}.txt`);
  const hooks = join(scratch, 'hooks.mjs');
  writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(${JSON.stringify(log)}, result.url + '\\n');
  return result;
}
`,
  );
  const main = `
import { register, createRequire } from 'node:module';
import { readFileSync, writeFileSync } from 'node:fs';
writeFileSync(${JSON.stringify(log)}, '');
register(${JSON.stringify(pathToFileURL(hooks).href)});
await import(${JSON.stringify(pathToFileURL(file).href)});
const cjs = Object.keys(createRequire(import.meta.url).cache);
const urls = [...readFileSync(${JSON.stringify(log)}, 'utf8').split('\\n'), ...cjs];
const names = new Set();
for (const url of urls) {
  const match = /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(url);
  if (match) names.add(match[1]);
}
console.log(JSON.stringify([...names].sort()));
`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', main], {
    cwd: root,
    encoding: 'utf8',
    timeout: 30_000,
  });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  return JSON.parse(run.stdout.trim().split('\n').pop()!) as string[];
}

/** The bare specifiers (packages) that the .d.ts file and every .d.ts it imports refer to. */
function packagesInTypes(entry: string): string[] {
  const seen = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    for (const [, specifier] of text.matchAll(/(?:from|import\()\s*'([^']+)'/g)) {
      if (specifier!.startsWith('.')) {
        visit(resolve(dirname(file), specifier!.replace(/\.js$/, '.d.ts')));
      } else packages.add(specifier!);
    }
  };
  visit(entry);
  return [...packages].sort();
}

describe('what each entry loads (the built dist: `npm run build` first)', () => {
  it('has the built package', () => {
    expect(existsSync(join(root, 'dist/src/index.js')), 'dist/ is missing: npm run build').toBe(
      true,
    );
  });

  for (const entry of ['.', './client', './protocol']) {
    it(`"${entry}" loads no Redis or NATS client and not jose, at run time or in its types`, () => {
      const target = pkg.exports[entry]!;
      const loaded = packagesLoadedBy(join(root, target.default));
      expect(loaded.filter((name) => brokerClients.test(name))).toEqual([]);
      const typed = packagesInTypes(join(root, target.types));
      expect(typed.filter((name) => brokerClients.test(name))).toEqual([]);
    });
  }

  it('"./redis" loads ioredis and no NATS package; "./nats" the NATS packages and not ioredis', () => {
    const redis = packagesLoadedBy(join(root, pkg.exports['./redis']!.default));
    expect(redis).toContain('ioredis');
    expect(redis.filter((name) => name.startsWith('@nats-io/'))).toEqual([]);
    const nats = packagesLoadedBy(join(root, pkg.exports['./nats']!.default));
    expect(nats).toEqual(expect.arrayContaining(['@nats-io/transport-node', '@nats-io/jetstream']));
    expect(nats).not.toContain('ioredis');
  });

  it('"./jwt" loads jose and no broker client', () => {
    const jwt = packagesLoadedBy(join(root, pkg.exports['./jwt']!.default));
    expect(jwt).toContain('jose');
    expect(jwt.filter((name) => name !== 'jose' && brokerClients.test(name))).toEqual([]);
  });

  it('"./msgpack" loads msgpackr and "./cbor" cbor-x, and no broker client', () => {
    const msgpack = packagesLoadedBy(join(root, pkg.exports['./msgpack']!.default));
    expect(msgpack).toContain('msgpackr');
    expect(msgpack.filter((name) => brokerClients.test(name) || name === 'cbor-x')).toEqual([]);
    const cbor = packagesLoadedBy(join(root, pkg.exports['./cbor']!.default));
    expect(cbor).toContain('cbor-x');
    expect(cbor.filter((name) => brokerClients.test(name) || name === 'msgpackr')).toEqual([]);
  });

  it('".", "./client" and "./protocol" load neither msgpackr nor cbor-x (a gateway imports them when enabled)', () => {
    for (const entry of ['.', './client', './protocol']) {
      const loaded = packagesLoadedBy(join(root, pkg.exports[entry]!.default));
      expect(loaded.filter((name) => name === 'msgpackr' || name === 'cbor-x')).toEqual([]);
    }
  });

  it('"./standalone" loads yaml and no broker client and not jose (each loads when configured)', () => {
    const standalone = packagesLoadedBy(join(root, pkg.exports['./standalone']!.default));
    expect(standalone).toContain('yaml');
    expect(standalone.filter((name) => brokerClients.test(name))).toEqual([]);
  });

  it('source maps carry their sources (the .ts files are not in the package)', () => {
    const map = JSON.parse(readFileSync(join(root, 'dist/src/redis.js.map'), 'utf8')) as {
      sources: string[];
      sourcesContent?: string[];
    };
    expect(map.sourcesContent).toHaveLength(map.sources.length);
    expect(map.sourcesContent![0]).toBe(readFileSync(join(root, 'src/redis.ts'), 'utf8'));
  });
});

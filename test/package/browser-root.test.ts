// The package's root import in a browser app: `import { createClient } from 'wsrpc-gateway'`,
// resolved through the packed package's "exports" as a browser bundler resolves it (the
// `browser` condition), gives the client entry ("./client"'s very module) and none of the
// server: esbuild and Vite bundle it without a Node built-in, `ws` or `pino`, and TypeScript
// with that condition sees the client's types. Node, and a bundler for Node, still get the server
// entry. The package is `npm pack` of the built work tree (run `npm run build` first), unpacked
// into an empty project whose dependencies are this repository's node_modules: no registry.
import { spawnSync } from 'node:child_process';
import type { SpawnSyncReturns } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { BuildOptions, Metafile, Plugin } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const work = mkdtempSync(join(tmpdir(), 'browser-root-'));
const project = join(work, 'app');
const installed = join(project, 'node_modules/wsrpc-gateway');
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** What npm passes its scripts (npm_package_*, npm_lifecycle_*...) would make npm pack act oddly. */
const env: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(
    ([key]) => !/^npm_/i.test(key) || /^npm_config_(cache|userconfig|globalconfig)$/i.test(key),
  ),
);

function run(command: string, args: string[], cwd: string): SpawnSyncReturns<string> {
  return spawnSync(command, args, { cwd, env, encoding: 'utf8', timeout: 60_000 });
}

beforeAll(() => {
  expect(
    existsSync(join(root, 'dist/src/client/index.js')),
    'dist/ is missing: npm run build',
  ).toBe(true);
  const pack = run(npm, ['pack', '--json', '--pack-destination', work], root);
  expect(pack.status, pack.stderr).toBe(0);
  const [packed] = JSON.parse(pack.stdout) as { filename: string }[];
  const untar = run('tar', ['-xzf', join(work, packed!.filename)], work);
  expect(untar.status, untar.stderr).toBe(0);
  mkdirSync(join(project, 'node_modules'), { recursive: true });
  renameSync(join(work, 'package'), installed);
  // The package's dependencies, as an install would put them beside it.
  symlinkSync(join(root, 'node_modules'), join(installed, 'node_modules'), 'dir');
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'browser-app', version: '1.0.0', private: true, type: 'module' }),
  );
  writeFileSync(
    join(project, 'main.js'),
    `import { createClient, JsonRpcError } from 'wsrpc-gateway';
     globalThis.app = { createClient, JsonRpcError };\n`,
  );
  writeFileSync(
    join(project, 'index.html'),
    '<!doctype html><script type="module" src="./main.js"></script>\n',
  );
}, 60_000);

/** What a browser build must not reach: Node's modules and the server's packages. */
const serverOnly = new Set([
  ...builtinModules,
  ...builtinModules.map((name) => `node:${name}`),
  'ws',
  'pino',
  'prom-client',
  'undici',
  'yaml',
]);

/** Records every import of `serverOnly` (left external, so the build goes on to find them all). */
function recordServerImports(found: string[]): Plugin {
  return {
    name: 'record-server-imports',
    setup(b) {
      b.onResolve({ filter: /.*/ }, (args) => {
        if (!serverOnly.has(args.path) && !args.path.startsWith('node:')) return undefined;
        found.push(`${args.path} (from ${args.importer})`);
        return { path: args.path, external: true };
      });
    },
  };
}

/** The package's own files a bundle took in, from its metafile: paths under dist/. */
const packageFiles = (metafile: Metafile): string[] =>
  Object.keys(metafile.inputs)
    .map((input) => resolve(work, input))
    .map((path) => /node_modules\/wsrpc-gateway\/(dist\/.*)$/.exec(path)?.[1])
    .filter((path): path is string => path !== undefined);

async function bundle(contents: string, options: BuildOptions) {
  return build({
    stdin: { contents, resolveDir: project, loader: 'js' },
    bundle: true,
    format: 'esm',
    write: false,
    metafile: true,
    logLevel: 'silent',
    absWorkingDir: work,
    ...options,
  });
}

describe('the package root in a browser build (the `browser` export condition)', () => {
  it('esbuild, platform browser: the root import is the client alone, no Node built-in, ws or pino', async () => {
    const found: string[] = [];
    const out = await bundle(readFileSync(join(project, 'main.js'), 'utf8'), {
      platform: 'browser',
      plugins: [recordServerImports(found)],
    });
    expect(found).toEqual([]);
    const files = packageFiles(out.metafile!);
    expect(files).toContain('dist/src/client/index.js');
    expect(files.filter((file) => file.startsWith('dist/src/server/'))).toEqual([]);
  });

  it('the root and "./client" are one module there: one copy of each class and function', async () => {
    const out = await bundle(
      `import * as main from 'wsrpc-gateway';
       import * as client from 'wsrpc-gateway/client';
       console.log(JSON.stringify({
         sameClass: main.JsonRpcError === client.JsonRpcError,
         sameFactory: main.createClient === client.createClient,
         server: typeof main.createGateway,
       }));`,
      { platform: 'browser', outfile: join(work, 'same.mjs'), write: true },
    );
    expect(out.errors).toEqual([]);
    const ran = run(process.execPath, [join(work, 'same.mjs')], work);
    expect(ran.stderr).toBe('');
    expect(JSON.parse(ran.stdout)).toEqual({
      sameClass: true,
      sameFactory: true,
      server: 'undefined',
    });
  });

  it('Vite builds a page importing from the root with nothing externalised for the browser', async () => {
    const { build: viteBuild } = await import('vite');
    const out = await viteBuild({
      root: project,
      configFile: false,
      logLevel: 'silent',
      build: { write: false, reportCompressedSize: false },
    });
    const chunks = (Array.isArray(out) ? out[0]! : (out as { output: unknown[] })).output as {
      moduleIds?: string[];
    }[];
    const modules = chunks.flatMap((chunk) => chunk.moduleIds ?? []);
    // A Node built-in a browser build meets becomes Vite's `__vite-browser-external` stub.
    const offenders = modules.filter((id) =>
      /vite-browser-external|\/dist\/src\/server\/|\/node_modules\/(ws|pino|ioredis|@nats-io)\//.test(
        id,
      ),
    );
    expect(offenders).toEqual([]);
    expect(modules.some((id) => id.endsWith('/dist/src/client/index.js'))).toBe(true);
  }, 60_000);

  it('Node, and a bundle for Node, still get the server entry, import and require alike', async () => {
    const node = run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { createRequire } from 'node:module';
         const imported = await import('wsrpc-gateway');
         const required = createRequire(import.meta.url)('wsrpc-gateway');
         console.log(JSON.stringify([typeof imported.createGateway, required.createGateway === imported.createGateway]));`,
      ],
      project,
    );
    expect(node.stderr).toBe('');
    expect(JSON.parse(node.stdout)).toEqual(['function', true]);
    const forNode = await bundle(`export { createGateway } from 'wsrpc-gateway';`, {
      platform: 'node',
      packages: 'external',
    });
    expect(forNode.errors).toEqual([]);
    const forNodeInlined = await bundle(`export { createClient } from 'wsrpc-gateway';`, {
      platform: 'node',
      external: ['ws', 'pino', 'prom-client', 'undici', 'yaml', 'rxjs', 'nanoid'],
    });
    expect(packageFiles(forNodeInlined.metafile!)).toContain('dist/src/index.js');
  }, 60_000);

  /** tsc over app.ts with `compilerOptions` (JSON members): its output and exit status. */
  function typeCheck(source: string, compilerOptions: string): { output: string; status: number } {
    const dir = mkdtempSync(join(project, 'ts-'));
    writeFileSync(join(dir, 'app.ts'), source);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      `{ "compilerOptions": { ${compilerOptions}, "module": "esnext", "moduleResolution": "bundler",
         "target": "es2022", "lib": ["es2022", "dom"], "strict": true, "noEmit": true },
         "files": ["app.ts"] }`,
    );
    const tsc = join(root, 'node_modules/typescript/bin/tsc');
    const out = run(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], dir);
    return { output: out.stdout + out.stderr, status: out.status ?? -1 };
  }

  it('TypeScript with the browser condition types the root as the client; without it, as before', () => {
    const browser = '"customConditions": ["browser"], "types": [], "skipLibCheck": false';
    const app = `import { createClient, JsonRpcError } from 'wsrpc-gateway';
      export const client = createClient({ url: 'wss://example.com/rpc' });
      export const isRpcError = (err: unknown): boolean => err instanceof JsonRpcError;`;
    expect(typeCheck(app, browser)).toEqual({ output: '', status: 0 });
    // The server is not there, at build time as in the bundle.
    const server = typeCheck(
      `import { createGateway } from 'wsrpc-gateway';\nexport { createGateway };`,
      browser,
    );
    expect(server.output).toContain("has no exported member 'createGateway'");
    // A project without the condition (a Node one, most bundler ones) reads the root's types.
    const types = join(root, 'node_modules/@types');
    const plain = `"skipLibCheck": true, "types": ["node"], "typeRoots": [${JSON.stringify(types)}]`;
    expect(
      typeCheck(
        `import { createClient, createGateway } from 'wsrpc-gateway';\nexport { createClient, createGateway };`,
        plain,
      ),
    ).toEqual({ output: '', status: 0 });
  }, 120_000);
});

/**
 * Running a docs recipe as written: its code blocks picked out by the file their first line
 * names, type-checked together against this tree's src/ (as the package a reader installs),
 * bundled with esbuild, and its server run as a process until /livez answers.
 */
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import ts from 'typescript';
import { afterAll } from 'vitest';
import type { Contract } from '../../src/contract/contract.js';
import { thisPackage } from './bundle.js';
import { root } from './demo-process.js';
import { httpGet } from './network.js';

/**
 * A folder for one test file's recipe files, removed after its tests: under node_modules, so the
 * bundles' bare imports (react, zod/mini, express, ws...) resolve as installed.
 */
export function recipeDir(name: string): string {
  const dir = join(root, 'node_modules', '.cache', `wsrpc-${name}-${process.pid}`);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * The fenced ```ts / ```tsx blocks of `docs/<page>` that start with each given prefix (a block's
 * first line names its file: `// server.ts: ...`). Throws naming the first prefix not found.
 */
export function recipeBlocks<K extends string>(
  page: string,
  starts: Record<K, string>,
): Record<K, string> {
  const markdown = readFileSync(join(root, 'docs', page), 'utf8');
  const blocks = [...markdown.matchAll(/```tsx?\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const found = {} as Record<K, string>;
  for (const [key, start] of Object.entries(starts) as [K, string][]) {
    const block = blocks.find((b) => b.startsWith(start));
    if (!block) throw new Error(`no block starting "${start}" in docs/${page}`);
    found[key] = block;
  }
  return found;
}

/**
 * Type errors of `files` (relative to `dir`), with the tree's tsconfig, JSX on, and
 * `wsrpc-gateway` and its entries mapped onto src/; only errors in `dir` count.
 */
export function recipeTypeErrors(
  dir: string,
  files: string[],
  /** Over the tree's options: what the recipe's page says its tsconfig.json needs. */
  overrides: ts.CompilerOptions = {},
): string[] {
  const config = ts.readConfigFile(join(root, 'tsconfig.json'), (p) => ts.sys.readFile(p));
  const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  const program = ts.createProgram(
    files.map((f) => join(dir, f)),
    {
      ...options,
      ...overrides,
      noEmit: true,
      jsx: ts.JsxEmit.ReactJSX,
      baseUrl: root,
      paths: {
        'wsrpc-gateway': ['src/index.ts'],
        'wsrpc-gateway/client': ['src/client/index.ts'],
        'wsrpc-gateway/react': ['src/react/index.ts'],
      },
    },
  );
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file?.fileName.startsWith(dir))
    .map((d) => `${d.file!.fileName}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
}

/**
 * `entry` bundled for Node into `outfile` (packages external, `wsrpc-gateway` from src/);
 * `experimentalDecorators` for code written with TypeScript's decorators (NestJS's).
 */
export async function buildForNode(
  entry: string,
  outfile: string,
  { experimentalDecorators = false } = {},
): Promise<void> {
  await build({
    entryPoints: [entry],
    // Only then in place of the tree's tsconfig.json, which esbuild reads otherwise.
    ...(experimentalDecorators && { tsconfigRaw: { compilerOptions: { experimentalDecorators } } }),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    outfile,
    plugins: [thisPackage],
    logLevel: 'silent',
  });
}

/** The recipe's `contract.ts` in `dir` as a module this process imports; its `exported` contract. */
export async function importRecipeContract(dir: string, exported: string): Promise<Contract> {
  const outfile = join(dir, 'contract.mjs');
  await buildForNode(join(dir, 'contract.ts'), outfile);
  return ((await import(outfile)) as Record<string, Contract>)[exported]!;
}

/** Poll the recipe server's /livez; fail with its output if it exits first, or after 30 s. */
export async function waitForRecipeServer(
  port: number,
  exited: () => boolean,
  output: () => string,
): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exited()) throw new Error(`the recipe's server exited before it listened:\n${output()}`);
    const answer = await httpGet(`http://127.0.0.1:${port}/livez`).catch(() => undefined);
    if (answer?.status === 200) return;
    if (Date.now() > deadline) throw new Error('the recipe never answered /livez');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

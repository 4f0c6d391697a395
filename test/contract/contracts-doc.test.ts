import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { typeErrors } from './type-errors.js';

/*
 * docs/contracts.md's blocks on nested names and composition, type-checked together as one
 * file: their imports merged (`wsrpc-gateway` is this tree's src/index.ts,
 * `wsrpc-gateway/client` its src/client/index.ts), `gateway`, `session` and `client` declared
 * as the page says they are.
 */

const page = readFileSync(new URL('../../docs/contracts.md', import.meta.url), 'utf8');

const modules: Record<string, string> = {
  'wsrpc-gateway': '../../src/index.js',
  'wsrpc-gateway/client': '../../src/client/index.js',
};

/** The ts blocks between two headings, their imports merged at the top. */
function blocksBetween(from: string, to: string): string {
  const start = page.indexOf(from);
  const end = page.indexOf(to, start);
  expect(start, from).toBeGreaterThanOrEqual(0);
  expect(end, to).toBeGreaterThan(start);
  const blocks = [...page.slice(start, end).matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const imports = new Map<string, Set<string>>();
  const body: string[] = [];
  for (const line of blocks.join('\n').split('\n')) {
    const found = /^import (type )?\{ (.+) \} from '(.+)';$/.exec(line);
    if (!found) {
      expect(line.startsWith('import '), `an import the test cannot read: ${line}`).toBe(false);
      body.push(line);
      continue;
    }
    const [, type = '', names, module] = found;
    const key = `${type}${modules[module!] ?? module!}`;
    const set = imports.get(key) ?? new Set<string>();
    for (const name of names!.split(', ')) set.add(name);
    imports.set(key, set);
  }
  const head = [...imports].map(([key, names]) => {
    const type = key.startsWith('type ') ? 'type ' : '';
    return `import ${type}{ ${[...names].join(', ')} } from '${key.slice(type.length)}';`;
  });
  return [
    ...head,
    "import type { RpcClient } from '../../src/client/client.js';",
    "import type { Gateway } from '../../src/server/gateway.js';",
    "import type { Session } from '../../src/server/session.js';",
    'declare const gateway: Gateway;',
    'declare const session: Session;',
    'declare const client: RpcClient;',
    ...body,
  ].join('\n');
}

describe('docs/contracts.md', () => {
  it('nested names and composition: the blocks compile', { timeout: 120_000 }, () => {
    const source = blocksBetween('### Nested names', '### Streams as async generators');
    expect(source).toContain('mergeContracts(');
    expect(typeErrors(source)).toEqual([]);
  });
});

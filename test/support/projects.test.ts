import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import config from '../../vitest.config.js';
import { patternRegExp, sharedModuleTiers, testFiles, tierOf, tierRules, tiers } from './tiers.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const files = testFiles(root);

/**
 * Imports that open sockets or start processes, which the unit tier must do without (node:http
 * and ws stay allowed: an unlistening server or a WebSocket class passed as an option is fine).
 */
const notForUnit = [
  /from 'node:(net|tls|child_process)'/,
  /from '(ioredis|@nats-io\/[^']+|playwright-core)'/,
  /from '[./]*\/support\/(resources|gateway|raw-rpc|sockets|network|metrics|tcp-relay|cluster|brokers|server-processes|processes|demo-process|demo-server|browser|bundle|tls)\.js'/,
];

describe('vitest projects (test tiers)', () => {
  it('every test file is in exactly one project', () => {
    const projects = config.test?.projects ?? [];
    const includes = projects.map((p) => {
      const test = (p as { test?: { name?: unknown; include?: string[] } }).test;
      return { name: test?.name, include: test?.include ?? [] };
    });
    expect(includes.map((p) => p.name)).toEqual([...tiers]);
    const homeless: string[] = [];
    const twice: string[] = [];
    for (const file of files) {
      const count = includes.filter((p) => p.include.includes(file)).length;
      if (count === 0) homeless.push(file);
      if (count > 1) twice.push(file);
    }
    expect(homeless, 'in no project').toEqual([]);
    expect(twice, 'in two projects').toEqual([]);
    expect(files.length).toBeGreaterThan(100);
  });

  it('every rule in test/support/tiers.ts matches a file', () => {
    const unused = tierRules
      .flatMap(([tier, patterns]) => patterns.map((pattern) => ({ tier, pattern })))
      .filter(({ pattern }) => !files.some((file) => patternRegExp(pattern).test(file)));
    expect(unused).toEqual([]);
  });

  it('no unit test imports what opens a socket or starts a process', () => {
    const offenders = files
      .filter((file) => tierOf(file) === 'unit')
      .flatMap((file) => {
        const text = readFileSync(`${root}${file}`, 'utf8');
        return notForUnit.filter((re) => re.test(text)).map((re) => `${file}: ${re.source}`);
      });
    expect(offenders).toEqual([]);
  });

  it('no file of a tier that shares modules mocks a module or leaves a global or listener behind', () => {
    const offenders = files
      .filter((file) => sharedModuleTiers.includes(tierOf(file)))
      .flatMap((file) => {
        const text = readFileSync(`${root}${file}`, 'utf8');
        const count = (re: RegExp): number => text.match(re)?.length ?? 0;
        const found: string[] = [];
        if (/\bvi\.(mock|doMock)\(/.test(text)) found.push('vi.mock');
        if (/\bvi\.stubGlobal\(/.test(text) && !/\bvi\.unstubAllGlobals\(/.test(text)) {
          found.push('vi.stubGlobal without vi.unstubAllGlobals');
        }
        if (/\bvi\.stubEnv\(/.test(text) && !/\bvi\.unstubAllEnvs\(/.test(text)) {
          found.push('vi.stubEnv without vi.unstubAllEnvs');
        }
        if (/\bprocess\.env\.\w+ *=[^=]/.test(text)) found.push('process.env set (use vi.stubEnv)');
        if (count(/\bprocess\.(on|once)\(/g) > count(/\bprocess\.(off|removeListener)\(/g)) {
          found.push('process.on without process.off');
        }
        return found.map((what) => `${file}: ${what}`);
      });
    expect(offenders).toEqual([]);
  });

  it('the patterns read as documented', () => {
    expect(patternRegExp('test/peer/**').test('test/peer/a/b.test.ts')).toBe(true);
    expect(patternRegExp('test/x/*.test.ts').test('test/x/a/b.test.ts')).toBe(false);
    expect(patternRegExp('test/x/{a,b*}.test.ts').test('test/x/bc.test.ts')).toBe(true);
    expect(patternRegExp('test/x/{a,b*}.test.ts').test('test/x/c.test.ts')).toBe(false);
    expect(tierOf('test/somewhere-new/thing.test.ts')).toBe('sockets');
  });
});

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  clientOptionRules,
  heartbeatRules,
  reconnectRules,
} from '../../src/client/client-options.js';
import {
  gatewayDefaults,
  gatewayOptionRules,
  identityRules,
} from '../../src/server/gateway-config.js';
import { limitRules } from '../../src/server/options.js';
import { deflateDefaults } from '../../src/server/deflate-options.js';

const doc = readFileSync(new URL('../../docs/options.md', import.meta.url), 'utf8');

/** The option each table row names: the backticked name in its first cell. */
function documented(section: string): string[] {
  const start = doc.indexOf(`## ${section}\n`);
  expect(start, `docs/options.md has a "## ${section}" section`).toBeGreaterThanOrEqual(0);
  const end = doc.indexOf('\n## ', start + 1);
  const text = doc.slice(start, end < 0 ? undefined : end);
  return [...text.matchAll(/^\| `([^`]+)` +\|/gm)].map((match) => match[1]!);
}

const under = (prefix: string, keys: object): string[] =>
  Object.keys(keys).map((key) => `${prefix}.${key}`);

describe('docs/options.md, the options reference', () => {
  it('documents every option of createGateway the resolver knows, and no other', () => {
    const known = [
      ...Object.keys(gatewayOptionRules),
      ...under('routes', { ...gatewayDefaults.routes, rpc: '' }),
      ...under('userInbox', gatewayDefaults.userInbox),
      ...under('clusterEvents', gatewayDefaults.clusterEvents),
      ...under('subscriptionMethods', gatewayDefaults.subscriptionMethods),
      ...under('limits', limitRules),
      ...under('identity', identityRules),
      ...under('perMessageDeflate', deflateDefaults),
    ];
    expect(documented('createGateway').sort()).toEqual(known.sort());
  });

  it('documents every option of createClient the resolver knows, and no other', () => {
    const known = [
      ...Object.keys(clientOptionRules),
      ...under('reconnect', reconnectRules),
      ...under('heartbeat', heartbeatRules),
      ...under('subscriptionMethods', gatewayDefaults.subscriptionMethods),
    ];
    expect(documented('createClient').sort()).toEqual(known.sort());
  });

  it('states the defaults the resolvers fill in', () => {
    const rows = new Map(
      [...doc.matchAll(/^\| `([^`]+)` +\| [^|]+\| ([^|]+)\|/gm)].map((m) => [m[1], m[2]!.trim()]),
    );
    for (const [name, value] of Object.entries(gatewayDefaults)) {
      if (typeof value !== 'object')
        expect(rows.get(name), name).toBe(`\`${JSON.stringify(value)}\``);
    }
    for (const [name, value] of Object.entries(gatewayDefaults.userInbox)) {
      expect(rows.get(`userInbox.${name}`), name).toBe(`\`${value}\``);
    }
  });
});

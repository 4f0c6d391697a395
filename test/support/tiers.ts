/**
 * Which tier (vitest project, see vitest.config.ts) each test file runs in:
 *
 * - unit: no socket, no child process, no build: the protocol, peers over in-memory
 *   transports, options, pure pub/sub parts. Seconds; `npm run test:unit`.
 * - sockets: gateways and clients on loopback sockets inside the test process.
 * - external: Redis, NATS, child processes (the CLI, the demo, gateway nodes, redis-server,
 *   nginx), the build in dist/, npm pack.
 * - browser: Chromium driving the demo page.
 *
 * The rules are tried in order and the first pattern that matches a file decides; a file that
 * no rule names runs in `sockets`, which works everywhere the suite does. A new file in a unit
 * folder that opens a socket goes in the first rule; test/support/projects.test.ts fails when
 * a unit file imports what opens sockets or processes, and when a rule matches no file.
 */
import { readdirSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

export const tiers = ['unit', 'sockets', 'external', 'browser'] as const;
export type Tier = (typeof tiers)[number];

/**
 * Tiers whose files share their worker's modules (vitest's `isolate: false`): a worker reads the
 * gateway's modules once rather than once per file, which was a third of the suite's time. A
 * file there must leave nothing behind (a global it stubs unstubbed, a process listener
 * removed) and must not `vi.mock` a module, as a module another file loaded first is not
 * mocked again: such a file goes in an isolated tier (test/support/projects.test.ts checks).
 */
export const sharedModuleTiers: readonly Tier[] = ['sockets'];

/** Patterns: `**` any folders, `*` any characters within a name, `{a,b}` either. */
export const tierRules: readonly (readonly [Tier, readonly string[]])[] = [
  // Files in the unit folders below that open sockets.
  [
    'sockets',
    [
      'test/peer/long-timeouts.test.ts',
      'test/peer/untrusted-peer.test.ts',
      'test/protocol/id-echo.test.ts',
      'test/protocol/wire-error-codes.test.ts',
    ],
  ],
  [
    'external',
    [
      'test/broker/**',
      'test/cli/**',
      'test/cluster/**',
      'test/package/**',
      'test/chaos/chaos.test.ts',
      // Runs esbuild (a child process).
      'test/client/bundle-size.test.ts',
      // Needs dist/ (the build).
      'test/client/package-exports.test.ts',
      // The build under React 18 in a child process (and npm ci of React 18 the first time).
      'test/react/react18-hydration.test.ts',
      'test/deploy/nginx-metrics.test.ts',
      'test/hardening/{broker-down,drain-process,fuzz}.test.ts',
      'test/integration/{demo-process,recipe*}.test.ts',
      'test/jwt/recipe-jwt.test.ts',
      'test/standalone/{check-config,example,serve,serve-readiness,serve-drain-server-api}.test.ts',
      'test/sse/nginx-fallback.test.ts',
      'test/server-api/{cluster,consume,consume-readiness,once-model,python-backend}.test.ts',
      'test/pubsub/{broker-link-gap,deny-list,notify-broker-down,presence-drain,redis-gateway,redis-live-queue-bound,replay-bounds,topic-limits}.test.ts',
      'test/transports/{eof-flush,same-answers,stdio,tls}.test.ts',
      // Gateway mode's upstreams: the Python upstream (a child process), NATS.
      'test/upstream/{routing,faults,nats-upstream,nats-kept-requests,nats-retry,properties}.test.ts',
    ],
  ],
  ['browser', ['test/e2e/**']],
  [
    'unit',
    [
      'test/config/**',
      'test/peer/**',
      'test/protocol/**',
      'test/support/**',
      'test/upstream-hooks/{config,bounds-config,address-share-config,subscribe-share-model}.test.ts',
      'test/chaos/accounting.test.ts',
      'test/client/{canonical-json,joined-model,presence-state,subscription-model}.test.ts',
      'test/react/shared-store.test.ts',
      'test/client/{iterate-model,subscription-status-model}.test.ts',
      'test/deploy/deploy-files.test.ts',
      'test/hardening/{address-group,same-host}.test.ts',
      'test/pubsub/{delivery,delivery-continuity,delivery-pass,delivery-queues,except-set,history-reads,memory-broker,session-inbox-model,session-router,topic-registry,user-inbox-router}.test.ts',
      'test/upstream/{config,share-config,address-share-model}.test.ts',
      'test/standalone/{config-file,config-file-duplicate-keys}.test.ts',
      // Heap measurements that open no socket: isolated, so that nothing another file left
      // running allocates while they measure.
      'test/server/session-footprint.test.ts',
      'test/pubsub/{topic-footprint,delivery-footprint,replay-waits}.test.ts',
      'test/sse/sse-replay-footprint.test.ts',
      'test/transports/ws-settings-retention.test.ts',
    ],
  ],
];

/** A pattern of `tierRules` as a regular expression over a whole path. */
export function patternRegExp(pattern: string): RegExp {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (pattern.startsWith('**', i)) {
      source += '.*';
      i++;
    } else if (c === '*') source += '[^/]*';
    else if (c === '{') source += '(?:';
    else if (c === '}') source += ')';
    else if (c === ',') source += '|';
    else source += c.replace(/[.+?^$()[\]\\|]/g, '\\$&');
  }
  return new RegExp(`^${source}$`);
}

const compiledRules = tierRules.map(
  ([tier, patterns]) => [tier, patterns.map(patternRegExp)] as const,
);

/** The tier of a test file, by its path from the repository root (`test/...`, with `/`). */
export function tierOf(file: string): Tier {
  for (const [tier, patterns] of compiledRules) {
    if (patterns.some((p) => p.test(file))) return tier;
  }
  return 'sockets';
}

/** Every `*.test.ts` under `root`/test, as paths from `root` with `/`. */
export function testFiles(root: string): string[] {
  const dir = join(root, 'test');
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.test.ts'))
    .map((name) => relative(root, join(dir, name)).split(sep).join('/'))
    .sort();
}

/** The test files of each tier. */
export function filesByTier(root: string): Record<Tier, string[]> {
  const byTier: Record<Tier, string[]> = { unit: [], sockets: [], external: [], browser: [] };
  for (const file of testFiles(root)) byTier[tierOf(file)].push(file);
  return byTier;
}

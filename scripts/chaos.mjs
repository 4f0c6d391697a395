// The chaos suite from the command line (issue 13):
//
//   npm run chaos -- --broker redis|nats --seconds N [--rate 300] [--backoff-cap-ms 1000]
//
// Runs test/chaos/engine.ts: three gateway processes on a private broker (redis-server or
// nats-server, started on a free port), subscribers on the project's own client, a publisher at
// --rate messages/s, and faults injected for N seconds (each at least once): node SIGKILL,
// broker SIGKILL and restart, one node's broker link cut for longer than history, a drain.
// Prints the accounting table (per scenario: published, deliveries expected, delivered, in
// counted gaps, in missed, in unknown gaps, SILENTLY LOST, duplicates, reordered, resume time
// after the fault ended, backoff cap) and every violation found.
//
// The engine is TypeScript under test/: it is bundled here with esbuild (as
// test/support/cluster.ts bundles the gateway node), with the current src/, into a temporary
// directory. Exit 0 when nothing was lost, duplicated or reordered and nothing else was wrong,
// 1 otherwise, 2 on a setup error, 3 if the watchdog (N + 300 s) fires.

import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('../', import.meta.url));

const { values } = parseArgs({
  options: {
    broker: { type: 'string', default: 'redis' },
    seconds: { type: 'string', default: '60' },
    rate: { type: 'string', default: '300' },
    'backoff-cap-ms': { type: 'string', default: '1000' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(
    'npm run chaos -- --broker redis|nats --seconds N [--rate 300] [--backoff-cap-ms 1000]',
  );
  process.exit(0);
}
const broker = values.broker;
const seconds = Number(values.seconds);
const rate = Number(values.rate);
const backoffCapMs = Number(values['backoff-cap-ms']);
if (broker !== 'redis' && broker !== 'nats') fail('--broker must be redis or nats');
if (!(seconds >= 0)) fail('--seconds must be a number >= 0');
if (!(rate > 0)) fail('--rate must be a number > 0');
if (!(backoffCapMs > 0)) fail('--backoff-cap-ms must be a number > 0');

function fail(message) {
  console.error(message);
  process.exit(2);
}

const watchdog = setTimeout(
  () => {
    console.error(`chaos: watchdog fired after ${seconds + 300} s`);
    process.exit(3);
  },
  (seconds + 300) * 1_000,
);
watchdog.unref();

const dir = mkdtempSync(join(tmpdir(), 'wsrpc-chaos-'));
let code = 2;
try {
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const entry = join(root, 'test/chaos/engine.ts');
  const outfile = join(dir, 'engine.mjs');
  await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    outfile,
    sourcemap: 'inline',
    logLevel: 'error',
    // support.ts finds the repository (and test/cluster/node.ts) from its own URL.
    define: { 'import.meta.url': JSON.stringify(pathToFileURL(entry).href) },
  });
  const { runChaos, formatReport } = await import(pathToFileURL(outfile).href);
  const result = await runChaos({
    broker,
    seconds,
    rate,
    backoffCapMs,
    log: (line) => console.log(line),
  });
  console.log(formatReport(result));
  code = result.violations === 0 && result.problems.length === 0 ? 0 : 1;
} catch (err) {
  console.error(err);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(code);

// The benchmark runner: `node bench/run.mjs [--quick] [--rounds N] [--contestants a,b]
// [--scenarios x,y] [--no-write]`. It forks one server process per contestant and one
// load generator (and, for the upstream scenarios, one upstream process every contestant of
// theirs calls), interleaves the contestants round-robin through every scenario for
// R rounds, prints one markdown table per scenario and writes them to docs/benchmarks.md
// (a run of some scenarios only replaces those scenarios' tables there).
// BENCH_SERVER_FLAGS adds Node flags to every server process, BENCH_LOAD_FLAGS to the load
// generator's (`--cpu-prof --cpu-prof-dir=DIR` for a CPU profile of each; Node refuses those in
// NODE_OPTIONS).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { HOST, settingsFor } from './config.mjs';
import { baseline, contestants as allContestants } from './contestants/index.mjs';
import { Child } from './ipc.mjs';
import {
  formatForConsole,
  machineInfo,
  partialForConsole,
  renderPartial,
  renderResults,
  writeResults,
} from './report.mjs';
import { scenariosFor, takesPart, warmUp } from './scenarios.mjs';

// `--scale`: the scale run (bench/scale/run.mjs, its own flags) instead of this one.
if (process.argv.includes('--scale')) {
  const { main } = await import('./scale/run.mjs');
  process.exit(await main(process.argv.slice(2).filter((arg) => arg !== '--scale')));
}

const here = (path) => fileURLToPath(new URL(path, import.meta.url));
const BENCHMARKS = here('../docs/benchmarks.md');
// Pure-JS `ws` in every process: the native bufferutil/utf-8-validate addons are optional
// dependencies that some installs have and others do not.
const CHILD_ENV = { WS_NO_BUFFER_UTIL: '1', WS_NO_UTF_8_VALIDATE: '1' };

const { values: opts } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    contestants: { type: 'string' },
    scenarios: { type: 'string' },
    'no-write': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});

if (opts.help) {
  console.log(
    'node bench/run.mjs [--quick] [--rounds N] [--contestants id,id] [--scenarios id,id] [--no-write]\n' +
      `contestants: ${allContestants.map((c) => c.id).join(', ')}\n` +
      `scenarios: ${scenariosFor(settingsFor({}))
        .map((s) => s.id)
        .join(', ')}\n` +
      'A run of some scenarios replaces only their tables in docs/benchmarks.md.',
  );
  process.exit(0);
}
if (!existsSync(here('../dist/src/index.js'))) {
  console.error(
    'bench: dist/src/index.js is missing: run `npm run build` first (npm run bench does).',
  );
  process.exit(2);
}

const settings = settingsFor({ quick: opts.quick, rounds: opts.rounds && Number(opts.rounds) });
const pick = (list, ids) => (ids ? list.filter((x) => ids.split(',').includes(x.id)) : list);
const allScenarios = scenariosFor(settings);
const scenarios = pick(allScenarios, opts.scenarios);
// A run of some scenarios only replaces those scenarios' tables in docs/benchmarks.md and keeps the rest.
const partial = scenarios.length < allScenarios.length;
const tables = scenarios.flatMap((s) => s.tables);
// Each table's baseline always runs (its ratios are taken against it); a contestant that takes
// part in none of the scenarios run is not started.
const baselineIds = new Set(tables.map((t) => t.baselineId ?? baseline.id));
const picked = pick(allContestants, opts.contestants);
// A row driven by another client than the bench's raw one brings the row its client CPU is
// compared with (the same server, the raw client).
for (const c of picked) if (c.clientBaselineId) baselineIds.add(c.clientBaselineId);
const runsSome = (c) => scenarios.some((s) => takesPart(c, s));
const contestants = allContestants.filter(
  (c) => (picked.includes(c) || baselineIds.has(c.id)) && runsSome(c),
);
const needsUpstream = scenarios.some((s) => s.kind === 'upstream');

/** results: table id -> contestant id -> { values: { figure: [per round] }, lost }, only for
 *  the contestants that take part in the table's scenario and, when the table names its rows
 *  (`contestantIds`), are among them (a table shows only those rows). */
const results = new Map(
  scenarios.flatMap((s) =>
    s.tables.map((t) => [
      t.id,
      new Map(
        contestants
          .filter((c) => takesPart(c, s) && (t.contestantIds?.includes(c.id) ?? true))
          .map((c) => [c.id, { values: {}, lost: 0 }]),
      ),
    ]),
  ),
);
const failures = [];
const startedAt = performance.now();
const log = (line) => process.stderr.write(line + '\n');

function fail(message) {
  failures.push(message);
  log(`\n!!!!!!!! FAILURE: ${message}\n`);
}

// ---- processes
/** Node flags from the environment variable `name` (see the top of this file). */
const flagsFrom = (name) => process.env[name]?.split(/\s+/).filter(Boolean) ?? [];
const newLoadgen = () =>
  new Child('load generator', here('./loadgen.mjs'), {
    execArgv: flagsFrom('BENCH_LOAD_FLAGS'),
    env: CHILD_ENV,
  });
let loadgen = newLoadgen();
const servers = new Map();
/** The upstream of the upstream scenarios: { child, url }, started before the servers. */
let upstream;

function urlFor(contestant, port) {
  return contestant.client.kind === 'socket.io'
    ? `http://${HOST}:${port}`
    : `ws://${HOST}:${port}${contestant.client.path}`;
}

async function startUpstream() {
  const child = new Child('upstream', here('./upstream.mjs'), { env: CHILD_ENV });
  try {
    const { port } = await child.request('start', { host: HOST }, 30_000);
    return { child, url: `http://${HOST}:${port}/rpc` };
  } catch (err) {
    await child.stop();
    throw err;
  }
}

async function startServer(contestant) {
  // A direct contestant has no server: its client calls the upstream itself.
  if (contestant.direct) {
    if (!upstream) throw new Error('the upstream is not running');
    return { child: undefined, url: upstream.url };
  }
  const child = new Child(`${contestant.name} server`, here('./server.mjs'), {
    execArgv: ['--expose-gc', ...flagsFrom('BENCH_SERVER_FLAGS')],
    env: CHILD_ENV,
  });
  try {
    const { port } = await child.request(
      'start',
      { id: contestant.id, host: HOST, upstreamUrl: upstream?.url },
      30_000,
    );
    return { child, url: urlFor(contestant, port) };
  } catch (err) {
    await child.stop();
    throw err;
  }
}

async function stopAll() {
  await Promise.all([
    loadgen.stop(),
    ...[...servers.values()].map((s) => s.child?.stop()),
    upstream?.child.stop(),
  ]);
}

const watchdog = setTimeout(() => {
  log(`bench: watchdog: the run exceeded ${settings.watchdogMs / 60_000} minutes; stopping.`);
  loadgen.proc.kill('SIGKILL');
  for (const s of servers.values()) s.child?.proc.kill('SIGKILL');
  upstream?.child.proc.kill('SIGKILL');
  process.exit(2);
}, settings.watchdogMs);
watchdog.unref();
process.once('SIGINT', () => {
  log('bench: interrupted');
  void stopAll().then(() => process.exit(130));
});

let nextSequence = 1;
const ctx = {
  settings,
  get loadgen() {
    return loadgen;
  },
  server(contestant) {
    const server = servers.get(contestant.id);
    if (!server) throw new Error(`${contestant.name}: no server running`);
    return server;
  },
  freshServer: startServer,
  upstream() {
    if (!upstream?.child.alive) throw new Error('the upstream is not running');
    return upstream.child;
  },
  /** Fan-out payload counters never repeat within a run, so a late message cannot pass as a new one. */
  takeSequence(n) {
    const first = nextSequence;
    nextSequence += n;
    return first;
  },
};

/** After a failed slice: a fresh load generator, and a fresh server if it died. */
async function recover(contestant) {
  await loadgen.stop();
  loadgen = newLoadgen();
  const server = servers.get(contestant.id);
  if (server?.child && !server.child.alive) {
    servers.delete(contestant.id);
    try {
      servers.set(contestant.id, await startServer(contestant));
    } catch (err) {
      fail(`${contestant.name}: server could not be restarted: ${err.message}`);
    }
  }
}

function record(round, contestant, outcomes) {
  for (const { table, values, problems } of outcomes) {
    const entry = results.get(table)?.get(contestant.id);
    if (!entry) continue;
    // A slice that went wrong measured something else: only its loss count is kept.
    for (const [key, value] of Object.entries(values)) {
      if (key === 'lost') entry.lost += value;
      else if (problems.length === 0) (entry.values[key] ??= [])[round] = value;
    }
    const title = tables.find((t) => t.id === table)?.title ?? table;
    for (const p of problems) fail(`round ${round + 1}, ${contestant.name}, ${title}: ${p}`);
    const summary = Object.entries(values)
      .filter(([key]) => key !== 'lost')
      .map(([key, v]) => `${key} ${typeof v === 'number' ? Number(v.toPrecision(4)) : v}`)
      .join(', ');
    log(`  ${table.padEnd(18)} ${contestant.name.padEnd(28)} ${summary}`);
  }
}

function formatDuration(ms) {
  const s = Math.round(ms / 1000);
  return s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s} s`;
}

// ---- the run
log(
  `bench: ${contestants.length} contestants × ${scenarios.length} scenarios × ${settings.rounds} rounds` +
    (opts.quick ? ' (quick)' : ''),
);
if (needsUpstream) {
  try {
    upstream = await startUpstream();
  } catch (err) {
    fail(`the upstream did not start: ${err.message}`);
  }
}
for (const c of contestants) {
  try {
    servers.set(c.id, await startServer(c));
  } catch (err) {
    fail(`${c.name}: server did not start: ${err.message}`);
  }
}

log('warm-up (unmeasured)');
for (const c of contestants) {
  if (!servers.has(c.id)) continue;
  try {
    for (const p of await warmUp(ctx, c)) fail(`warm-up, ${c.name}: ${p}`);
  } catch (err) {
    fail(`warm-up, ${c.name}: ${err.message}`);
    await recover(c);
  }
}

for (let round = 0; round < settings.rounds; round++) {
  const shift = round % contestants.length;
  const order = [...contestants.slice(shift), ...contestants.slice(0, shift)];
  log(
    `round ${round + 1}/${settings.rounds} (${formatDuration(performance.now() - startedAt)} so far)`,
  );
  for (const scenario of scenarios) {
    for (const c of order) {
      if (!takesPart(c, scenario)) continue;
      try {
        record(round, c, await scenario.run(ctx, c));
      } catch (err) {
        fail(`round ${round + 1}, ${c.name}, ${scenario.id}: ${err.message}`);
        await recover(c);
      }
    }
  }
}

await stopAll();
clearTimeout(watchdog);

const durationMs = performance.now() - startedAt;
const args = process.argv.slice(2).join(' ');
const script = process.env.npm_lifecycle_event;
const command =
  script === 'bench:quick' || script === 'bench'
    ? `npm run ${script}${args && !(script === 'bench:quick' && args === '--quick') ? ` -- ${args}` : ''}`
    : `node bench/run.mjs${args ? ` ${args}` : ''}`;
const run = {
  command,
  date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
  durationText: formatDuration(durationMs),
  machine: machineInfo(),
  settings,
  kinds: new Set(scenarios.map((s) => s.kind)),
  scenarioIds: scenarios.map((s) => s.id),
  complete: allContestants.filter(runsSome).every((c) => contestants.includes(c)),
  contestants,
  baselineId: baseline.id,
  tables,
  results,
  failures,
};
const section = partial ? renderPartial(run) : renderResults(run);
process.stdout.write(
  '\n' + (await formatForConsole(partial ? partialForConsole(section) : section, BENCHMARKS)),
);
if (!opts['no-write']) {
  await writeResults(BENCHMARKS, section);
  log(`\nbench: results written to docs/benchmarks.md`);
}
log(`bench: done in ${formatDuration(durationMs)}`);
if (failures.length > 0) {
  log(`\n!!!!!!!! ${failures.length} FAILURE(S):\n${failures.map((f) => `  - ${f}`).join('\n')}`);
  process.exitCode = 1;
}

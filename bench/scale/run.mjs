// The scale run: `npm run bench -- --scale [--connections N]` (or `node bench/scale/run.mjs`).
// For each contestant (bench/scale/contestants.mjs), one after the other: a server process (or,
// with --nodes K, K of them: for the gateway, nodes sharing one topic space through Redis or
// NATS), a few load processes (bench/scale/load.mjs) that open N connections from loopback
// source addresses in 127.0.0.0/8 (a /24 drawn for the run), then the steps of bench/scale/phases.mjs. Every count and wait is
// bounded, a watchdog ends the run, and every child is stopped (killed at worst) on the way out.
// Prints one markdown table, both contestants side by side.
import { existsSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { ScaleChild, fileLimitFor } from './child.mjs';
import { names } from './contestants.mjs';
import { removeBrokerPrefix } from './broker-cleanup.mjs';
import { Phases } from './phases.mjs';
import { pidOf } from './local-brokers.mjs';
import { ServerGroup } from './server-group.mjs';
import { renderTable } from './table.mjs';

const here = (path) => fileURLToPath(new URL(path, import.meta.url));
// Pure-JS `ws` in every process, as in bench/run.mjs.
const CHILD_ENV = { WS_NO_BUFFER_UTIL: '1', WS_NO_UTF_8_VALIDATE: '1' };
const HOST = '127.0.0.1';
/** File descriptors a process needs besides its connections (modules, IPC, stdio, epoll...). */
const FD_RESERVE = 256;
const MAX_CONNECTIONS = 200_000;
/** How long an interrupted run waits for the removal of its nodes' broker state. */
const BROKER_CLEANUP_MS = 10_000;
/** How long the empty server's idle CPU is read, before any connection. */
const EMPTY_IDLE_MS = 5_000;

const options = {
  connections: { type: 'string', default: '100000' },
  'load-processes': { type: 'string' },
  nodes: { type: 'string', default: '1' },
  broker: { type: 'string', default: 'redis' },
  'history-storage': { type: 'string' },
  contestants: { type: 'string', default: 'gateway,raw-ws' },
  messages: { type: 'string', default: '20' },
  burst: { type: 'string', default: '10' },
  topics: { type: 'string', default: '10000' },
  'per-topic': { type: 'string', default: '10' },
  passes: { type: 'string', default: '3' },
  'idle-seconds': { type: 'string', default: '35' },
  concurrency: { type: 'string', default: '100' },
  'watchdog-minutes': { type: 'string', default: '20' },
  help: { type: 'boolean', default: false },
};

const HELP = `node bench/scale/run.mjs [--connections N] [--nodes K] [--broker redis|nats]
  [--history-storage file|memory] [--load-processes P]
  [--contestants gateway,raw-ws] [--messages M] [--burst B] [--topics T] [--per-topic S] [--passes R]
  [--concurrency C] [--idle-seconds I] [--watchdog-minutes W]
N connections (default 100,000, at most ${MAX_CONNECTIONS.toLocaleString('en-US')}) on one server process per
contestant, or on K (default 1, at most 16) sharing them evenly: gateway nodes with a topic
space shared through the broker (default redis; its CPU counted with theirs), raw ws servers
each handed every publish (--broker none: the gateway's nodes too, no broker). Opened by P load processes (default 2 to 4, or K times what one
process's open files allow), at most C handshakes in flight each;
held idle for I seconds (default 35: a whole heartbeat round of the gateway); M paced messages
and a burst of B to one topic all of them subscribe to; T topics (0: that step skipped) with S
subscribers each, R publish passes. What the gateway nodes leave on the broker (keys, streams
under the run's own prefix) is removed after them. --history-storage: the NATS broker's
historyStorage (default file). Capped to what the open-file limit allows. SCALE_GATEWAY_MODULE=<path> measures
another build of the gateway (a worktree's dist/src/index.js) instead of this one's dist/.`;

function int(value, name, min, max) {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new Error(`--${name} must be an integer from ${min} to ${max}, not ${value}`);
  return n;
}

function machineLine() {
  const cpus = os.cpus();
  return (
    `${cpus[0]?.model.trim() ?? 'unknown CPU'}, ${cpus.length} cores, ` +
    `${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ` +
    `load average ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')} at the start`
  );
}

export async function main(argv) {
  const { values: opts } = parseArgs({ args: argv, options });
  if (opts.help) {
    console.log(HELP);
    return 0;
  }
  if (!existsSync(here('../../dist/src/index.js'))) {
    console.error('bench --scale: dist/src/index.js is missing: run `npm run build` first.');
    return 2;
  }
  const log = (line) => process.stderr.write(line + '\n');
  const requested = int(opts.connections, 'connections', 100, MAX_CONNECTIONS);
  const settings = {
    messages: int(opts.messages, 'messages', 1, 1_000),
    burst: int(opts.burst, 'burst', 1, 1_000),
    topics: int(opts.topics, 'topics', 0, 100_000),
    perTopic: int(opts['per-topic'], 'per-topic', 1, 100),
    passes: int(opts.passes, 'passes', 1, 20),
    idleMs: int(opts['idle-seconds'], 'idle-seconds', 1, 120) * 1000,
    concurrency: int(opts.concurrency, 'concurrency', 1, 1_000),
    waveSize: 2_000,
    topicsPerTurn: 100,
    gapMs: 50,
    stepTimeoutMs: 5 * 60_000,
  };
  const kinds = opts.contestants.split(',');
  for (const kind of kinds) if (!names[kind]) throw new Error(`unknown contestant ${kind}`);
  const nodes = int(opts.nodes, 'nodes', 1, 16);
  const brokerKind = opts.broker;
  if (brokerKind !== 'redis' && brokerKind !== 'nats' && brokerKind !== 'none')
    throw new Error(`--broker must be redis, nats or none, not ${brokerKind}`);
  const historyStorage = opts['history-storage'];
  if (
    historyStorage !== undefined &&
    (brokerKind !== 'nats' || !['file', 'memory'].includes(historyStorage))
  )
    throw new Error(`--history-storage takes file or memory, with --broker nats`);

  // Each server process holds its node's share: the open-file limit decides how many there can be.
  const files = fileLimitFor(Math.ceil(requested / nodes) + FD_RESERVE);
  const perProcess = files.limit - FD_RESERVE;
  const perNode = Math.min(
    Math.ceil(requested / nodes),
    Math.floor(perProcess / 1_000) * 1_000 || perProcess,
  );
  const connections = Math.min(requested, perNode * nodes);
  const notes = [];
  if (connections < requested)
    notes.push(
      `${files.note}: ${connections.toLocaleString('en-US')} connections instead of ${requested.toLocaleString('en-US')}`,
    );
  const loadsPerNode = Math.ceil(perNode / perProcess);
  const loadCount = opts['load-processes']
    ? int(opts['load-processes'], 'load-processes', 1, 16)
    : nodes > 1
      ? nodes * loadsPerNode
      : Math.max(Math.min(4, Math.max(2, Math.ceil(connections / 25_000))), loadsPerNode);
  // Load process p connects to node p mod K: every node gets the same share.
  if (loadCount % nodes !== 0)
    throw new Error(`--load-processes must be a multiple of --nodes (${nodes})`);
  if (nodes > 1)
    notes.push(
      `${nodes} server processes per contestant, ${perNode.toLocaleString('en-US')} connections each: ` +
        (brokerKind === 'none'
          ? `no broker: the gateway's nodes share no topic space, as raw ws's servers do (each is handed every publish at once; the harness is their broker); `
          : `the gateway's nodes share one topic space through ${brokerKind === 'redis' ? 'Redis' : 'NATS'} ` +
            `(a publish goes through the first node; the server CPU figures include the broker's, from /proc), ` +
            `raw ws's servers share none (each is handed every publish at once; the harness is their broker); `) +
        `memory is the processes' sum`,
    );
  if (historyStorage) notes.push(`the NATS broker's topic streams in ${historyStorage} storage`);
  const shares = Array.from(
    { length: loadCount },
    (_, p) => Math.floor(connections / loadCount) + (p < connections % loadCount ? 1 : 0),
  );
  // Each load process gets its own source addresses, and each contestant its own range, so no
  // ephemeral port is still in TIME_WAIT from an earlier step (at most ~28,000 per address). The
  // ranges are in a /24 of 127.0.0.0/8 drawn for this run: the sockets a run closed stay in
  // TIME_WAIT for a minute, and a run started within it on the same addresses found its
  // first contestant's connect storm several times slower (19,000 connections: 31.9 s against 5.2).
  const perLoad = Math.max(2, Math.ceil(Math.max(...shares) / 10_000));
  const subnet = `127.${1 + Math.floor(Math.random() * 254)}.${Math.floor(Math.random() * 256)}`;
  const addressesFor = (c, p) =>
    Array.from({ length: perLoad }, (_, i) => `${subnet}.${2 + (c * loadCount + p) * perLoad + i}`);
  if (2 + kinds.length * loadCount * perLoad > 255)
    throw new Error('not enough loopback addresses');
  const subscriptions = settings.topics * settings.perTopic;
  if (Math.ceil(subscriptions / connections) > 100)
    throw new Error(
      'more than 100 subscriptions per connection (the gateway default maxSubscriptions)',
    );

  const children = new Set();
  const spawn = (name, module, execArgv = []) => {
    const child = new ScaleChild(name, here(module), {
      execArgv,
      env: CHILD_ENV,
      wrap: files.wrap,
    });
    children.add(child);
    return child;
  };
  /** The broker state of the contestant under way (its nodes' prefix), until it is removed. */
  let brokerInUse;
  /** Set once the run is being stopped: it goes no further, and `abort` ends the process. */
  let aborting = false;
  /** Stop every child and, within BROKER_CLEANUP_MS, remove what the nodes left on the broker. */
  const abort = async (why, code) => {
    if (aborting) return;
    aborting = true;
    log(`bench --scale: ${why}; stopping.`);
    for (const child of children) child.kill();
    if (brokerInUse) {
      let timer;
      const deadline = new Promise((resolve) => (timer = setTimeout(resolve, BROKER_CLEANUP_MS)));
      await Promise.race([removeBrokerPrefix(brokerInUse).catch(() => undefined), deadline]);
      clearTimeout(timer);
    }
    process.exit(code);
  };
  const watchdogMs = int(opts['watchdog-minutes'], 'watchdog-minutes', 1, 120) * 60_000;
  const watchdog = setTimeout(
    () => void abort(`watchdog: over ${watchdogMs / 60_000} minutes`, 2),
    watchdogMs,
  );
  watchdog.unref();
  const onSignal = () => void abort('interrupted', 130);
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  const startedAt = Date.now();
  const machine = machineLine();
  log(
    `bench --scale: ${connections.toLocaleString('en-US')} connections, ${loadCount} load processes ` +
      `(${shares.map((s) => s.toLocaleString('en-US')).join(' + ')}), ${kinds.join(', ')}; ${machine}`,
  );
  for (const note of notes) log(`  note: ${note}`);

  const results = new Map();
  const problems = [];
  for (const [c, kind] of kinds.entries()) {
    // Stopping: no next contestant; abort exits the process once the broker is cleaned.
    if (aborting) await new Promise(() => undefined);
    const name = names[kind];
    log(`${name}:`);
    const servers = Array.from({ length: nodes }, (_, i) =>
      spawn(nodes > 1 ? `${name} node ${i + 1}` : `${name} server`, './server.mjs', [
        '--expose-gc',
      ]),
    );
    // Gateway nodes share a topic space through the broker, under a prefix of this run's own.
    const sharedTopics = nodes > 1 && kind === 'gateway' && brokerKind !== 'none';
    const broker = sharedTopics
      ? {
          kind: brokerKind,
          prefix: `scale${process.pid}x${Date.now().toString(36)}`,
          ...(historyStorage && { historyStorage }),
        }
      : undefined;
    brokerInUse = broker;
    const brokerPid = sharedTopics ? pidOf(`${brokerKind}-server`) : undefined;
    if (sharedTopics && brokerPid === undefined)
      notes.push(`no process named ${brokerKind}-server: the broker's CPU is not counted`);
    const server =
      nodes > 1
        ? new ServerGroup(servers, {
            sharedTopics,
            brokerPid,
          })
        : servers[0];
    const loads = shares.map((_, p) => spawn(`load ${p + 1}`, './load.mjs'));
    const phases = new Phases({
      server,
      loads,
      shares,
      addresses: shares.map((_, p) => addressesFor(c, p)),
      settings,
      log,
    });
    const r = { name };
    try {
      const started = await Promise.all(
        servers.map((s) =>
          s.request('start', { kind, host: HOST, connections: perNode, broker }, 60_000),
        ),
      );
      const urls = started.map(({ port }) => `ws://${HOST}:${port}/rpc`);
      r.base = await phases.baseline();
      r.emptyIdle = await phases.emptyIdle(EMPTY_IDLE_MS);
      log(`  storm to ${connections.toLocaleString('en-US')}...`);
      r.storm = await phases.storm(urls);
      log(`  open in ${(r.storm.openMs / 1000).toFixed(1)} s, ${r.storm.failed} failed`);
      r.open = await phases.memory();
      log(`  idle for ${settings.idleMs / 1000} s...`);
      r.idle = await phases.idle(settings.idleMs);
      log('  one topic, every connection subscribed...');
      r.allSub = await phases.subscribe({ topic: 'all' });
      r.allMem = await phases.memory();
      r.paced = await phases.paced(settings.messages);
      log(`  paced: last delivery after ${r.paced.toLastMedianMs.toFixed(1)} ms (median)`);
      r.burst = await phases.burst(settings.burst);
      log(`  burst: ${r.burst.cpuPerDeliveryUs.toFixed(2)} µs CPU per delivery`);
      await phases.unsubscribe();
      r.unsubMem = await phases.memory();
      // --topics 0: no many-topics step.
      if (settings.topics > 0) {
        log(`  ${settings.topics.toLocaleString('en-US')} topics × ${settings.perTopic}...`);
        r.topicPrepare = await phases.prepareTopics({ topics: settings.topics });
        log(`  first publish to each topic: ${(r.topicPrepare.ms / 1000).toFixed(1)} s`);
        r.topicSub = await phases.subscribe({
          prefix: 't.',
          topics: settings.topics,
          perTopic: settings.perTopic,
        });
        r.topicMem = await phases.memory();
        r.topicPasses = await phases.topicPasses({
          topics: settings.topics,
          passes: settings.passes,
          accepted: r.topicSub.accepted,
        });
        log(`  ${r.topicPasses.cpuPerPublishUs.toFixed(1)} µs CPU per publish to one topic`);
      }
    } catch (err) {
      phases.problem(err.message);
    }
    problems.push(...phases.problems.map((p) => `${name}: ${p}`));
    results.set(kind, r);
    await Promise.all(loads.map((load) => load.request('closeAll').catch(() => undefined)));
    await Promise.all([...servers, ...loads].map((child) => child.stop()));
    for (const child of [...servers, ...loads]) children.delete(child);
    if (broker) {
      try {
        const removed = await removeBrokerPrefix(broker);
        log(`  removed ${removed.toLocaleString('en-US')} broker keys or streams of the run`);
      } catch (err) {
        problems.push(`${name}: could not remove the run's broker state (${err.message})`);
      }
      brokerInUse = undefined;
    }
  }
  clearTimeout(watchdog);
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);

  const minutes = ((Date.now() - startedAt) / 60_000).toFixed(1);
  const args = argv.length ? ` ${argv.join(' ')}` : '';
  const command =
    process.env.npm_lifecycle_event === 'bench'
      ? `npm run bench -- --scale${args}`
      : `node bench/scale/run.mjs${args}`;
  process.stdout.write(
    renderTable({
      results,
      kinds,
      connections,
      nodes,
      settings,
      subscriptions,
      loadCount,
      command,
      date: new Date().toISOString().slice(0, 10),
      machine,
      minutes,
      notes,
      problems,
    }),
  );
  if (problems.length > 0) {
    log(`\n!!!!!!!! ${problems.length} problem(s):\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    return 1;
  }
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}

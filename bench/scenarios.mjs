// The scenarios, run from the runner's side: each drives one contestant's server and
// the load generator over IPC for one slice, and returns the figures of that slice.
// A slice's server CPU time is the delta of process.cpuUsage() (user + system) in the
// server process across the measured window (plus, for the two-node contestants, the same
// delta in node B's process: see bench/server.mjs). The upstream scenarios also read the
// upstream's process (bench/upstream.mjs), which every contestant of theirs calls. A slice's
// client CPU time is the same delta in the load generator's process: what its clients spent
// (the harness's own bookkeeping per call or message included, the same for every client).
import { sleep } from './ipc.mjs';
import { percentile } from './stats.mjs';
import { presenceScenario, runPresence } from './presence-scenario.mjs';
import { deflateScenario } from './deflate-scenario.mjs';

// Client CPU is compared with the bench's raw client against the same server, in the same
// round (`ratioAgainst: 'client'`: the row's clientBaselineId), which isolates the client's cost.
const clientCpuFigure = (key, label) => ({
  key,
  label,
  format: 'sig',
  ratioAgainst: 'client',
  ratioLabel: '× raw client',
});
const latencyFigures = [
  { key: 'p50Ms', label: 'p50 ms', format: 'sig' },
  { key: 'p99Ms', label: 'p99 ms', format: 'sig' },
];
const requestFigures = [
  { key: 'cpuUs', label: 'server CPU µs/req', format: 'sig' },
  { key: 'rps', label: 'req/s', format: 'int' },
  ...latencyFigures,
  clientCpuFigure('clientCpuUs', 'client CPU µs/req'),
];
const CLIENT_CPU_NOTE =
  'Client CPU: the load generator’s own CPU time across the window, per unit; × raw client: ' +
  'divided by that of the bench’s raw ws client against the same server in the same round ' +
  '(for the rows driven by another client of that server).';
// Bursts: the time until the last subscriber has the last message, from the first publish (how
// long until everyone is up to date; measured from the last publish, it would reward the slower
// servers, whose backlog builds up on their side, not the client's). Paced: for each message,
// the time from its publish to its last subscriber, p50 and p99 over the run.
// Server CPU per published message, and per delivered one (the same CPU divided by messages ×
// subscribers: what one delivery to one subscriber costs).
/** Messages of a paced run left out of its percentiles: the first ones warm the path up. */
const PACED_SKIP = 5;

const fanoutFigures = (mode) => [
  { key: 'cpuUsPerMsg', label: 'server CPU µs/published msg', format: 'sig' },
  { key: 'cpuUsPerDelivery', label: 'server CPU µs/delivered msg', format: 'sig' },
  { key: 'deliveredPerSec', label: 'delivered msg/s', format: 'int' },
  ...(mode === 'burst'
    ? [{ key: 'lastMs', label: 'all delivered, ms after 1st publish', format: 'sig' }]
    : [
        { key: 'p50Ms', label: 'publish to last subscriber p50 ms', format: 'sig' },
        { key: 'p99Ms', label: 'p99 ms', format: 'sig' },
      ]),
  clientCpuFigure('clientCpuUsPerMsg', 'client CPU µs/received msg'),
];
// Gateway mode: the gateway's CPU per call is its whole added cost (upstream-direct has no
// gateway), so its ratio is taken against what the upstream itself spends on a call made directly.
const upstreamFigures = [
  { key: 'gatewayCpuUs', label: 'gateway CPU µs/call', format: 'sig', ratioTo: 'upstreamCpuUs' },
  { key: 'upstreamCpuUs', label: 'upstream CPU µs/call', format: 'sig' },
  { key: 'rps', label: 'calls/s', format: 'int' },
  ...latencyFigures,
  clientCpuFigure('clientCpuUs', 'client CPU µs/call'),
];
const UPSTREAM_BASELINE = 'upstream-direct';
const memoryFigures = [
  { key: 'rssKiB', label: 'RSS KiB/conn', format: 'sig' },
  { key: 'heapKiB', label: 'heap+external KiB/conn', format: 'sig' },
];

function requestScenario(conns, inflight, title) {
  const id = `rr-${conns}x${inflight}`;
  return {
    id,
    kind: 'requests',
    tables: [
      {
        id,
        title,
        about:
          `${conns} connection${conns > 1 ? 's' : ''}, each keeping ${inflight} call${inflight > 1 ? 's' : ''} ` +
          'of `sum([a, b])` outstanding (closed loop). Latency is measured in the load generator, ' +
          `send to reply. ${CLIENT_CPU_NOTE}`,
        figures: requestFigures,
      },
    ],
    run: (ctx, contestant) => runRequests(ctx, contestant, { id, conns, inflight }),
  };
}

async function runRequests(ctx, contestant, { id, conns, inflight }) {
  const { loadgen, settings } = ctx;
  const { child, url } = ctx.server(contestant);
  const { warmupMs, windowMs } = settings.requests;
  const problems = [];
  const maxMs = warmupMs + windowMs + 10_000;
  await loadgen.request('startRequests', {
    url,
    client: contestant.client,
    conns,
    inflight,
    maxMs,
  });
  let m0, m1, c0, c1;
  try {
    await sleep(warmupMs);
    [m0, c0] = await Promise.all([loadgen.request('mark'), child.request('cpu')]);
    await sleep(windowMs);
    [m1, c1] = await Promise.all([loadgen.request('mark'), child.request('cpu')]);
  } finally {
    const stop = await loadgen.request('stopRequests', {}, 20_000);
    if (stop.unanswered > 0) problems.push(`${stop.unanswered} calls never answered`);
    if (stop.wrong > 0)
      problems.push(`${stop.wrong} wrong or error replies, the first: ${stop.wrongSample}`);
  }
  const requests = m1.completed - m0.completed;
  if (requests <= 0) problems.push('no call completed in the measured window');
  const values = {
    cpuUs: (c1.us - c0.us) / requests,
    rps: requests / ((m1.t - m0.t) / 1000),
    p50Ms: m1.p50,
    p99Ms: m1.p99,
    clientCpuUs: (m1.cpuUs - m0.cpuUs) / requests,
  };
  return [{ table: id, values, problems }];
}

function fanoutScenario(subscribers, { burst, paced }) {
  const id = `fanout-${subscribers}`;
  const table = (mode, title, about) => ({
    id: `${id}-${mode}`,
    title,
    about,
    figures: fanoutFigures(mode),
    checksDelivery: true,
  });
  return {
    id,
    kind: 'fanout',
    tables: [
      table(
        'burst',
        `Fan-out to ${subscribers.toLocaleString('en-US')} subscribers, bursts`,
        `One topic, ${subscribers} subscriber connections; the server publishes ${burst.n} messages, ` +
          `${burst.burst} per event-loop turn, the turns back to back (setImmediate). ${CLIENT_CPU_NOTE}`,
      ),
      table(
        'paced',
        `Fan-out to ${subscribers.toLocaleString('en-US')} subscribers, paced single messages`,
        `One topic, ${subscribers} subscriber connections; the server publishes ${paced.n} messages, ` +
          `one per turn every ${paced.intervalMs} ms (an offered ` +
          `${((1000 / paced.intervalMs) * subscribers).toLocaleString('en-US')} deliveries/s: ` +
          `delivered msg/s is lower only if the contestant falls behind). Latency: for each ` +
          `message, from its publish to its arrival at the last subscriber, the first ` +
          `${PACED_SKIP} left out. ${CLIENT_CPU_NOTE}`,
      ),
    ],
    run: (ctx, contestant) => runFanout(ctx, contestant, subscribers),
  };
}

async function fanoutRun(ctx, contestant, { table, n, burst, intervalMs, subscribers, mode }) {
  const { loadgen } = ctx;
  const { child } = ctx.server(contestant);
  const first = ctx.takeSequence(n);
  const paced = mode === 'paced';
  await loadgen.request('arm', { first, n, perMessage: paced });
  const c0 = await child.request('cpu');
  const published = await child.request('publish', { first, n, burst, intervalMs }, 120_000);
  const timeoutMs = 5_000 + n * subscribers * 0.05;
  const got = await loadgen.request('awaitDelivery', { n, timeoutMs }, timeoutMs + 10_000);
  const c1 = await child.request('cpu');
  const problems = [];
  if (got.lost > 0)
    problems.push(
      `LOST ${got.lost} of ${got.expected} messages (${got.incomplete} subscribers incomplete)`,
    );
  if (got.outOfOrder > 0) problems.push(`${got.outOfOrder} messages out of order`);
  if (got.stray > 0) problems.push(`${got.stray} messages outside the expected range`);
  // Without every last message there is no "last subscriber has the last message".
  const complete = got.incomplete === 0;
  const values = {
    cpuUsPerMsg: (c1.us - c0.us) / n,
    cpuUsPerDelivery: (c1.us - c0.us) / (n * subscribers),
    deliveredPerSec: complete
      ? got.received / ((got.lastAt - published.startedAt) / 1000)
      : undefined,
    ...(paced
      ? pacedLatencies(published.times, got.arrivals)
      : { lastMs: complete ? got.lastAt - published.startedAt : undefined }),
    clientCpuUsPerMsg: got.received > 0 ? got.clientCpuUs / got.received : undefined,
    lost: Math.max(0, got.lost) + got.outOfOrder + got.stray,
  };
  return { table, values, problems };
}

/**
 * A paced run's p50 and p99 of each message's time from its publish to its last subscriber
 * (both clocks CLOCK_MONOTONIC, see ipc.mjs); a message some subscriber never got is left out
 * (the run reports it lost).
 */
function pacedLatencies(times, arrivals) {
  const latencies = [];
  for (let i = PACED_SKIP; i < times.length; i++) {
    const at = arrivals[i];
    if (Number.isFinite(at)) latencies.push(at - times[i]);
  }
  const sorted = Float64Array.from(latencies);
  return {
    p50Ms: percentile(sorted, sorted.length, 50),
    p99Ms: percentile(sorted, sorted.length, 99),
  };
}

/**
 * Open `count` subscribers and wait until the server has them all: the load generator's clients
 * that cannot tell when a subscribe was accepted resolve once it is sent, and their server
 * counts the live subscriptions (awaitSubscribers); for the others that wait returns at once.
 */
async function openSubscribers(ctx, contestant, count) {
  const { child, url } = ctx.server(contestant);
  await ctx.loadgen.request('openSubscribers', { url, client: contestant.client, count }, 120_000);
  await child?.request('awaitSubscribers', { count, timeoutMs: 60_000 }, 70_000);
}

async function runFanout(ctx, contestant, subscribers) {
  const { loadgen, settings } = ctx;
  const { burst, paced } = settings.fanout[subscribers];
  const id = `fanout-${subscribers}`;
  await openSubscribers(ctx, contestant, subscribers);
  try {
    return [
      await fanoutRun(ctx, contestant, {
        table: `${id}-burst`,
        mode: 'burst',
        ...burst,
        intervalMs: 0,
        subscribers,
      }),
      await fanoutRun(ctx, contestant, {
        table: `${id}-paced`,
        mode: 'paced',
        ...paced,
        burst: 1,
        subscribers,
      }),
    ];
  } finally {
    await loadgen.request('closeSubscribers', {}, 60_000);
  }
}

function upstreamScenario(inflight) {
  const id = `upstream-1x${inflight}`;
  const calls = `${inflight} call${inflight > 1 ? 's' : ''}`;
  return {
    id,
    kind: 'upstream',
    tables: [
      {
        id,
        title: `Gateway mode: calls routed to an upstream over HTTP, 1 connection × ${calls} in flight`,
        about:
          `One client keeps ${calls} of \`orders.sum([a, b])\` outstanding (closed loop), answered by ` +
          'a JSON-RPC-over-HTTP upstream on node:http in a process of its own. upstream direct: ' +
          'the load generator POSTs to the upstream on an undici keep-alive pool (16 sockets, as ' +
          "the gateway's); gateway → upstream: one WebSocket to a gateway (`serve`) routing " +
          "`orders.*` to the same upstream, with the bench's raw client or this project's " +
          'client. Latency is send to reply in the load generator. × direct: the figure divided ' +
          "by upstream direct's in the same round; for gateway CPU, by upstream direct's " +
          "upstream CPU (the gateway's cost per call as a multiple of the service's own). " +
          CLIENT_CPU_NOTE,
        figures: upstreamFigures,
        baselineId: UPSTREAM_BASELINE,
        ratioLabel: '× direct',
      },
    ],
    run: (ctx, contestant) => runUpstream(ctx, contestant, { id, inflight }),
  };
}

async function runUpstream(ctx, contestant, { id, inflight }) {
  const { loadgen, settings } = ctx;
  const { child, url } = ctx.server(contestant);
  const upstream = ctx.upstream();
  const { warmupMs, windowMs } = settings.requests;
  const problems = [];
  const cpu = () => Promise.all([child?.request('cpu'), upstream.request('cpu')]);
  const [, before] = await cpu();
  await loadgen.request('startRequests', {
    url,
    client: contestant.client,
    conns: 1,
    inflight,
    maxMs: warmupMs + windowMs + 10_000,
  });
  let m0, m1, g0, g1, u0, u1, stop;
  try {
    await sleep(warmupMs);
    [m0, [g0, u0]] = await Promise.all([loadgen.request('mark'), cpu()]);
    await sleep(windowMs);
    [m1, [g1, u1]] = await Promise.all([loadgen.request('mark'), cpu()]);
  } finally {
    stop = await loadgen.request('stopRequests', {}, 20_000);
    if (stop.unanswered > 0) problems.push(`${stop.unanswered} calls never answered`);
    if (stop.wrong > 0)
      problems.push(`${stop.wrong} wrong or error replies, the first: ${stop.wrongSample}`);
  }
  // Every answered call went through the upstream once (no retries are configured): a call
  // answered without it, or one sent twice, would be measuring something else.
  const [, after] = await cpu();
  const served = after.served - before.served;
  if (served < stop.completed || served > stop.completed + stop.unanswered)
    problems.push(`the upstream answered ${served} calls, the client got ${stop.completed}`);
  const requests = m1.completed - m0.completed;
  if (requests <= 0) problems.push('no call completed in the measured window');
  const values = {
    gatewayCpuUs: child ? (g1.us - g0.us) / requests : undefined,
    upstreamCpuUs: (u1.us - u0.us) / requests,
    rps: requests / ((m1.t - m0.t) / 1000),
    p50Ms: m1.p50,
    p99Ms: m1.p99,
    clientCpuUs: (m1.cpuUs - m0.cpuUs) / requests,
  };
  return [{ table: id, values, problems }];
}

function memoryScenario(connections) {
  const id = `memory-${connections}`;
  return {
    id,
    kind: 'memory',
    tables: [
      {
        id,
        title: `Memory per idle connection, ${connections.toLocaleString('en-US')} connections`,
        about:
          `A fresh server process (run with --expose-gc); memory read after GC before and after ` +
          `${connections} connections are open and idle; the delta divided by ${connections}.`,
        figures: memoryFigures,
      },
    ],
    run: (ctx, contestant) => runMemory(ctx, contestant, { id, connections }),
  };
}

async function runMemory(ctx, contestant, { id, connections }) {
  const { loadgen } = ctx;
  const fresh = await ctx.freshServer(contestant);
  let m0, m1;
  try {
    m0 = await fresh.child.request('memory', { gc: true });
    await loadgen.request(
      'openIdle',
      { url: fresh.url, client: contestant.client, count: connections },
      120_000,
    );
    try {
      await sleep(100);
      m1 = await fresh.child.request('memory', { gc: true });
    } finally {
      await loadgen.request('closeIdle', {}, 60_000);
    }
  } finally {
    await fresh.child.stop();
  }
  const problems = m1.collected ? [] : ['no GC before the reading (gc() unavailable)'];
  const heap = (m) => m.heapUsed + m.external;
  const values = {
    rssKiB: (m1.rss - m0.rss) / connections / 1024,
    heapKiB: (heap(m1) - heap(m0)) / connections / 1024,
  };
  return [{ table: id, values, problems }];
}

/** The kinds of scenario that take only the contestants made for them (`only`). */
const OWN_CONTESTANTS = new Set(['upstream', 'presence', 'deflate']);

/**
 * Whether a contestant runs a scenario: all do, except those limited to one kind (`only`); the
 * upstream scenarios take only their own (the other servers have no upstream to route to), and
 * so does the presence scenario (its gateways declare the presence topic).
 */
export const takesPart = (contestant, scenario) =>
  Array.isArray(contestant.only)
    ? contestant.only.includes(scenario.kind)
    : contestant.only
      ? contestant.only === scenario.kind
      : !OWN_CONTESTANTS.has(scenario.kind);

/**
 * Unmeasured: a short request load and a small fan-out (or a few hundred presence members
 * joining and leaving), so JIT warm-up is not all in round 1.
 */
export async function warmUp(ctx, contestant) {
  const { loadgen, settings } = ctx;
  const { url } = ctx.server(contestant);
  const { requestMs, fanoutMessages, presenceMembers } = settings.warmup;
  const runs = (kind) => takesPart(contestant, { kind });
  if (runs('presence')) return (await runPresence(ctx, contestant, presenceMembers)).problems;
  if (runs('requests') || runs('upstream')) {
    await loadgen.request('startRequests', {
      url,
      client: contestant.client,
      conns: 2,
      inflight: 16,
      maxMs: requestMs + 10_000,
    });
    await sleep(requestMs);
    await loadgen.request('stopRequests', {}, 20_000);
  }
  if (!runs('fanout')) return [];
  await openSubscribers(ctx, contestant, 100);
  try {
    const run = { table: 'warm-up', mode: 'burst', n: fanoutMessages, burst: 10, intervalMs: 0 };
    run.subscribers = 100;
    const { problems } = await fanoutRun(ctx, contestant, run);
    return problems;
  } finally {
    await loadgen.request('closeSubscribers', {}, 60_000);
  }
}

export function scenariosFor(settings) {
  return [
    requestScenario(1, 1, 'Request/response: 1 connection × 1 in flight'),
    requestScenario(1, 64, 'Request/response: 1 connection × 64 pipelined'),
    requestScenario(32, 16, 'Request/response: 32 connections × 16 in flight'),
    fanoutScenario(100, settings.fanout[100]),
    fanoutScenario(1000, settings.fanout[1000]),
    memoryScenario(settings.memory.connections),
    upstreamScenario(1),
    upstreamScenario(16),
    presenceScenario(settings),
    deflateScenario(settings),
  ];
}

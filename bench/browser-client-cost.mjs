// The client's own CPU in a real browser, beside a raw WebSocket client in the same browser:
// `node bench/browser-client-cost.mjs [--rounds N] [--seconds S] [--in-flight N]
// [--messages N]` (after `npm run build`; Debian's Chromium, or CHROMIUM_PATH).
//
// One gateway (the package's build, `sum` and the topic `bench`) serves a page that loads the
// browser bundle (dist/browser/client.js). Each variant runs in a fresh tab: calls of `sum`
// with N in flight for S seconds, or N messages published to `bench` and read by one
// subscription. What the tab spent is read from Chromium itself before and after the measured
// window, and divided by the calls or messages: the CPU time of its renderer process (DevTools
// `SystemInfo.getProcessInfo`, every renderer summed: the tab is the only one at work; its
// WebSocket events, garbage collection and other threads included, in 10 ms steps), and
// `Performance.getMetrics`'s ScriptDuration (JavaScript alone, in wall time: a thread the
// machine's other processes preempt counts the wait). The raw client is what a page would write by
// hand: a template-string request, a Map of pending ids and a promise per call, JSON.parse on
// every frame. The page also times each call's round trip (performance.now(), precise to 5 µs
// as the page is cross-origin isolated): p50 and p99 over the window. Rounds alternate the
// order of the variants; the ratio is taken per round and its median printed. --profile DIR writes a CPU profile of each variant's window in the first
// round to DIR (calls-own.cpuprofile, ...; the profiler's own cost is in that round's figures).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { benchLimits } from './gateway-limits.mjs';
import { median, ratioSummary } from './stats.mjs';

const { values: opts } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '3' },
    'in-flight': { type: 'string', default: '16' },
    messages: { type: 'string', default: '20000' },
    profile: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
const usage =
  'node bench/browser-client-cost.mjs [--rounds N] [--seconds S] [--in-flight N] [--messages N] [--profile DIR]';
if (opts.help) {
  console.log(usage);
  process.exit(0);
}
const ROUNDS = Number(opts.rounds);
const SECONDS = Number(opts.seconds);
const IN_FLIGHT = Number(opts['in-flight']);
const MESSAGES = Number(opts.messages);
if (
  !(ROUNDS >= 1 && ROUNDS <= 20) ||
  !(SECONDS >= 1 && SECONDS <= 60) ||
  !(IN_FLIGHT >= 1 && IN_FLIGHT <= 256) ||
  !(MESSAGES >= 100 && MESSAGES <= 1_000_000)
) {
  console.error(
    `${usage}\n--rounds 1..20, --seconds 1..60, --in-flight 1..256, --messages 100..1000000`,
  );
  process.exit(2);
}

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const bundle = new URL('../dist/browser/client.js', import.meta.url);
if (!existsSync(bundle)) {
  console.error('dist/browser/client.js is missing: run `npm run build` first');
  process.exit(2);
}
if (!existsSync(CHROMIUM)) {
  console.error(`no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH)`);
  process.exit(2);
}

/** Published at most this far ahead of what the tab has read: no message is dropped as slow. */
const AHEAD = 1_000;
/** Published per turn of the bench's event loop. */
const PER_TURN = 100;
/** A tab that reads no message for this long has lost some: the run fails. */
const STALL_MS = 30_000;
/** Bounds the whole run: it stops by itself. */
const WATCHDOG_MS = (ROUNDS * 4 * (SECONDS + 60) + 120) * 1000;

const page = `<!doctype html><script type="module">
import { createClient } from '/client.js';
const url = 'ws://' + location.host + '/rpc';

/** What a page would write by hand. */
function rawClient() {
  const socket = new WebSocket(url);
  const pending = new Map();
  let nextId = 0;
  let onData = () => undefined;
  socket.onmessage = ({ data }) => {
    const msg = JSON.parse(data);
    if (msg.method === 'subscription') return onData(msg.params.result.k);
    const resolve = pending.get(msg.id);
    pending.delete(msg.id);
    resolve?.(msg.result);
  };
  const call = (method, params) =>
    new Promise((resolve) => {
      const id = ++nextId;
      pending.set(id, resolve);
      socket.send('{"jsonrpc":"2.0","method":"' + method + '","params":' + params + ',"id":' + id + '}');
    });
  return {
    opened: new Promise((resolve) => (socket.onopen = resolve)),
    sum: (a) => call('sum', '[' + a + ',1]'),
    subscribe: (f) => {
      onData = f;
      return call('subscribe', '["bench"]');
    },
    close: () => socket.close(),
  };
}

function ownClient() {
  const client = createClient({ url });
  return {
    opened: client.opened(),
    sum: (a) => client.call('sum', [a, 1]),
    subscribe: (f) => client.subscribe('bench').subscribe((data) => f(data.k)),
    close: () => client.close(),
  };
}

const state = { done: 0, got: 0, running: false, failure: undefined, timing: false, rtts: [] };
window.state = state;
/** Start (or end) the window the round trips are recorded in; the calls made so far. */
window.timeCalls = (on) => {
  state.timing = on;
  return state.done;
};
/** p50 and p99 of the round trips recorded, in µs. */
window.roundTrips = () => {
  const xs = state.rtts.sort((a, b) => a - b);
  const at = (q) => xs[Math.min(xs.length - 1, Math.floor(q * xs.length))] * 1000;
  return { p50: at(0.5), p99: at(0.99), isolated: crossOriginIsolated };
};

window.startCalls = async (who, inFlight) => {
  const client = who === 'own' ? ownClient() : rawClient();
  await client.opened;
  state.running = true;
  const loop = (a) => {
    const sent = performance.now();
    client.sum(a).then((r) => {
      if (r !== a + 1) state.failure = 'wrong result ' + r + ' for ' + a;
      state.done++;
      if (state.timing && state.rtts.length < 1e6) state.rtts.push(performance.now() - sent);
      if (state.running) loop(a + 1);
    });
  };
  for (let i = 0; i < inFlight; i++) loop(i * 1e9);
  window.stop = () => {
    state.running = false;
    setTimeout(() => client.close(), 100);
  };
};

window.startMessages = async (who) => {
  const client = who === 'own' ? ownClient() : rawClient();
  await client.opened;
  let expected = 1;
  // k 0: a probe, published until the subscription is live; the measured ones count from 1.
  client.subscribe((k) => {
    if (k === 0) return void (state.live = true);
    if (k !== expected) state.failure = 'message ' + k + ' where ' + expected + ' was due';
    expected = k + 1;
    state.got++;
  });
  window.stop = () => client.close();
};
window.ready = true;
</script>`;

const script = readFileSync(bundle, 'utf8');
const { createGateway } = await import('wsrpc-gateway');
const { pino } = await import('pino');
const gateway = createGateway({
  logger: pino({ level: 'warn' }),
  limits: benchLimits,
  httpHandler: (req, res) => {
    const isScript = req.url === '/client.js';
    res.writeHead(200, {
      'content-type': `${isScript ? 'text/javascript' : 'text/html'}; charset=utf-8`,
      // Cross-origin isolated, the page's performance.now() is precise to 5 µs, not 100.
      'cross-origin-opener-policy': 'same-origin',
      'cross-origin-embedder-policy': 'require-corp',
    });
    res.end(isScript ? script : page);
    return true;
  },
});
gateway.method('sum', ([a, b]) => a + b);
gateway.topic('bench');
const { port } = await gateway.listen(0, '127.0.0.1');
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
const browserDevtools = await browser.newBrowserCDPSession();
const watchdog = setTimeout(() => {
  console.error(`watchdog: the run took over ${WATCHDOG_MS / 1000} s`);
  process.exit(1);
}, WATCHDOG_MS);
watchdog.unref();

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A fresh tab on the page, with the DevTools session its metrics are read through. With
 * `profileAs`, a CPU profile of the window (from the first `metrics()` to the second) is written
 * to --profile's folder under that name.
 */
async function openTab(profileAs) {
  const tab = await browser.newPage();
  await tab.goto(`http://127.0.0.1:${port}/`);
  await tab.waitForFunction(() => globalThis.ready === true);
  const devtools = await tab.context().newCDPSession(tab);
  await devtools.send('Performance.enable');
  let reads = 0;
  const metrics = async () => {
    if (profileAs && reads === 1) {
      const { profile } = await devtools.send('Profiler.stop');
      mkdirSync(opts.profile, { recursive: true });
      writeFileSync(join(opts.profile, `${profileAs}.cpuprofile`), JSON.stringify(profile));
    }
    const { metrics: list } = await devtools.send('Performance.getMetrics');
    const { processInfo } = await browserDevtools.send('SystemInfo.getProcessInfo');
    let cpu = 0;
    for (const p of processInfo) if (p.type === 'renderer') cpu += p.cpuTime * 1e6;
    if (profileAs && reads === 0) {
      await devtools.send('Profiler.enable');
      await devtools.send('Profiler.start');
    }
    reads++;
    return { cpu, script: list.find((m) => m.name === 'ScriptDuration').value * 1e6 };
  };
  return { tab, metrics };
}

/** Renderer CPU and JavaScript µs per call, `in-flight` calls kept going; round trips. */
async function calls(who, profileAs) {
  const { tab, metrics } = await openTab(profileAs);
  try {
    await tab.evaluate(([w, n]) => globalThis.startCalls(w, n), [who, IN_FLIGHT]);
    await sleep(1_000); // warm-up
    const [m0, d0] = [await metrics(), await tab.evaluate(() => globalThis.timeCalls(true))];
    await sleep(SECONDS * 1_000);
    const [m1, d1] = [await metrics(), await tab.evaluate(() => globalThis.timeCalls(false))];
    const failure = await tab.evaluate(() => globalThis.state.failure);
    if (failure) throw new Error(`${who}: ${failure}`);
    const { p50, p99, isolated } = await tab.evaluate(() => globalThis.roundTrips());
    // Without cross-origin isolation the page's clock is coarsened to 100 µs.
    if (!isolated) throw new Error('the page is not cross-origin isolated');
    await tab.evaluate(() => globalThis.stop());
    const n = d1 - d0;
    return { cpu: (m1.cpu - m0.cpu) / n, script: (m1.script - m0.script) / n, p50, p99 };
  } finally {
    await tab.close();
  }
}

/** Renderer CPU and JavaScript µs per message read, MESSAGES published to one subscription. */
async function messages(who, profileAs) {
  const { tab, metrics } = await openTab(profileAs);
  const got = () => tab.evaluate(() => globalThis.state.got);
  const payload = (k) => ({ k, price: 97000.25, symbol: 'BTC-USD' });
  try {
    await tab.evaluate((w) => globalThis.startMessages(w), who);
    for (let i = 0; !(await tab.evaluate(() => globalThis.state.live)); i++) {
      if (i === 500) throw new Error(`${who}: the subscription never went live`);
      await gateway.publish('bench', payload(0));
      await sleep(10);
    }
    const m0 = await metrics();
    let k = 0;
    let read = 0;
    let movedAt = Date.now();
    while (read < MESSAGES) {
      if (k < MESSAGES && k - read < AHEAD) {
        for (let i = 0; i < PER_TURN && k < MESSAGES; i++)
          await gateway.publish('bench', payload(++k));
      } else {
        await sleep(5);
        const now = await got();
        if (now > read) movedAt = Date.now();
        else if (Date.now() - movedAt > STALL_MS) {
          throw new Error(`${who}: stuck at ${now} of ${k} published messages read`);
        }
        read = now;
      }
    }
    const m1 = await metrics();
    const failure = await tab.evaluate(() => globalThis.state.failure);
    if (failure) throw new Error(`${who}: ${failure}`);
    if (read !== MESSAGES) throw new Error(`${who}: read ${read} of ${MESSAGES}`);
    await tab.evaluate(() => globalThis.stop());
    return { cpu: (m1.cpu - m0.cpu) / MESSAGES, script: (m1.script - m0.script) / MESSAGES };
  } finally {
    await tab.close();
  }
}

const fmt = (x) => x.toFixed(2);
/** The median of the rounds' ratios of `key`, this client's to the raw one's. */
const ratio = ({ own, raw }, key) =>
  ratioSummary(
    own.map((r) => r[key]),
    raw.map((r) => r[key]),
  ).median.toFixed(2) + '×';

const results = { calls: { raw: [], own: [] }, messages: { raw: [], own: [] } };
try {
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? ['raw', 'own'] : ['own', 'raw'];
    const as = (kind, who) => (opts.profile && round === 0 ? `${kind}-${who}` : undefined);
    for (const who of order) results.calls[who].push(await calls(who, as('calls', who)));
    for (const who of order) results.messages[who].push(await messages(who, as('messages', who)));
    console.error(`round ${round + 1} of ${ROUNDS} done`);
  }
  const version = browser.version();
  console.log(
    `Chromium ${version}, ${ROUNDS} rounds, calls: ${IN_FLIGHT} in flight for ${SECONDS} s, ` +
      `messages: ${MESSAGES} to one subscription\n`,
  );
  console.log(
    '| per | client | renderer CPU µs (each round) | median | × raw | script µs (median) | × raw |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  for (const [unit, byWho] of Object.entries(results)) {
    for (const who of ['raw', 'own']) {
      const rows = byWho[who];
      const cpu = rows.map((r) => r.cpu);
      const script = rows.map((r) => r.script);
      console.log(
        `| ${unit === 'calls' ? 'call' : 'message'} | ${who === 'own' ? 'createClient' : 'raw WebSocket'} | ` +
          `${cpu.map(fmt).join(', ')} | ${fmt(median(cpu))} | ${who === 'own' ? ratio(byWho, 'cpu') : ''} | ` +
          `${fmt(median(script))} | ${who === 'own' ? ratio(byWho, 'script') : ''} |`,
      );
    }
  }
  const { raw, own } = results.calls;
  console.log(
    '\n| call round trip in the page, µs | raw WebSocket (each round) | median | createClient (each round) | median | × raw |',
  );
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const key of ['p50', 'p99']) {
    const each = (rows) => rows.map((r) => r[key].toFixed(0)).join(', ');
    const mid = (rows) => median(rows.map((r) => r[key])).toFixed(0);
    console.log(
      `| ${key} | ${each(raw)} | ${mid(raw)} | ${each(own)} | ${mid(own)} | ${ratio(results.calls, key)} |`,
    );
  }
} finally {
  clearTimeout(watchdog);
  await browser.close();
  await gateway.close({ timeoutMs: 1_000 });
}

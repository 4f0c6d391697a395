// Paced fan-out, per message: `node bench/fanout-latency.mjs <gateway|ws> <wsrpc|raw>
// [subscribers=1000] [messages=200] [intervalMs=10]` (run `npm run build` first).
// One server process (this gateway with its defaults, or the raw `ws` floor of
// contestants/raw-ws.mjs) and, in this process, `subscribers` connections (this project's
// client, or raw `ws` with JSON.parse) on the topic "bench". The server publishes `messages`
// messages, one per turn every `intervalMs`; for each, the time from the publish call to its
// arrival at the LAST subscriber (one monotonic clock: both processes read hrtime). Prints p50,
// p90 and p99 of that (the first 5 messages left out), and each process's CPU per message (the
// client's also as user and system time).
// The bench's paced fan-out table reports only the last message, once per round.
//
// With CALLGRIND=<file> the server runs under `valgrind --tool=callgrind` and counts its
// instructions in a window instead: `messages` published unmeasured (warm-up), an empty window
// (<file>.1, what asking callgrind costs), then `messages` measured (<file>.2); each publish
// turn publishes BURST (default 1) messages. Compare `summary:` of .2 minus .1.
//
// CLIENT_MODULE=<path> takes createClient from there instead of the build (e.g. an esbuild
// bundle of src/client/index.ts, to compare two versions of the client without a build).
import { fork, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { benchLimits } from './gateway-limits.mjs';

const now = () => Number(process.hrtime.bigint());
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Zero (-z) or dump (-d) callgrind's counters; this process keeps running code until done. */
function callgrind(flag) {
  return new Promise((resolve) => {
    let done = false;
    const control = spawn('callgrind_control', [flag, String(process.pid)], { stdio: 'ignore' });
    control.on('exit', () => (done = true));
    const spin = () => (done ? resolve() : setImmediate(spin));
    spin();
  });
}

async function startServer(kind) {
  if (kind === 'gateway') {
    const { createGateway } = await import('wsrpc-gateway');
    const { pino } = await import('pino');
    const gateway = createGateway({
      logger: pino({ level: 'warn' }),
      limits: benchLimits,
    });
    gateway.topic('bench');
    const { port } = await gateway.listen(0, '127.0.0.1');
    return { port, path: '/rpc', publish: (data) => void gateway.publish('bench', data) };
  }
  const { startRawWs } = await import('./contestants/raw-ws.mjs');
  const server = await startRawWs('127.0.0.1', (ws, frame) => ws.send(frame));
  return { port: server.port, path: '/', publish: (data) => server.publish(data) };
}

async function serve(kind) {
  const server = await startServer(kind);
  process.send({ port: server.port, path: server.path });
  process.on('message', async ({ n, intervalMs, exit }) => {
    if (exit) process.exit(0);
    const burst = Number(process.env.BURST ?? 1);
    const run = async (from, to) => {
      for (let k = from; k < to;) {
        await nextTurn();
        for (let b = 0; b < burst && k < to; b++, k++) server.publish({ k });
      }
      await sleep(300);
    };
    if (process.env.CALLGRIND) {
      await run(-n, 0);
      await callgrind('-z');
      await sleep(300);
      await callgrind('-d');
      await callgrind('-z');
      await run(0, n);
      await callgrind('-d');
      process.send({ times: [], cpuUs: 0 });
      return;
    }
    const times = [];
    const cpu0 = process.cpuUsage();
    for (let k = 0; k < n; k++) {
      await sleep(intervalMs);
      times.push(now());
      server.publish({ k });
    }
    const cpu = process.cpuUsage(cpu0);
    setTimeout(() => process.send({ times, cpuUs: cpu.user + cpu.system }), 200);
  });
}

async function subscribe(url, clientKind, got) {
  if (clientKind === 'wsrpc') {
    const { createClient } = await import(process.env.CLIENT_MODULE ?? 'wsrpc-gateway/client');
    const client = createClient({ url, WebSocket, reconnect: false });
    await client.opened();
    client.subscribe('bench').subscribe({ next: (data) => got(data.k) });
    return () => client.close();
  }
  const ws = new WebSocket(url);
  await new Promise((resolve) => ws.once('open', resolve));
  ws.on('message', (data) => {
    const message = JSON.parse(data.toString());
    if (message.method) got(message.params.result.k);
  });
  ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'subscribe', params: ['bench'] }));
  return () => ws.terminate();
}

const USAGE =
  'node bench/fanout-latency.mjs <gateway|ws> <wsrpc|raw> [subscribers=1000] [messages=200] [intervalMs=10]';

async function main() {
  const [serverKind, clientKind, subscribers = '1000', messages = '200', interval = '10'] =
    process.argv.slice(2);
  if (!['gateway', 'ws'].includes(serverKind) || !['wsrpc', 'raw'].includes(clientKind)) {
    console.log(USAGE);
    process.exitCode = serverKind === '--help' ? 0 : 2;
    return;
  }
  const S = Number(subscribers);
  const N = Number(messages);
  const out = process.env.CALLGRIND;
  const child = fork(fileURLToPath(import.meta.url), ['--server', serverKind], {
    ...(out && {
      execPath: '/usr/bin/valgrind',
      execArgv: ['--tool=callgrind', `--callgrind-out-file=${out}`, process.execPath],
    }),
    env: { ...process.env, WS_NO_BUFFER_UTIL: '1', WS_NO_UTF_8_VALIDATE: '1' },
  });
  const { port, path } = await new Promise((resolve) => child.once('message', resolve));
  const url = `ws://127.0.0.1:${port}${path}`;
  const lastAt = new Float64Array(N);
  const count = new Int32Array(N);
  const got = (k) => {
    if (out || !(k >= 0 && k < N)) return;
    count[k]++;
    lastAt[k] = now();
  };
  const closers = [];
  for (let i = 0; i < S; i++) closers.push(await subscribe(url, clientKind, got));
  await sleep(1_000);
  const cpu0 = process.cpuUsage();
  child.send({ n: N, intervalMs: Number(interval) });
  const { times, cpuUs } = await new Promise((resolve) => child.once('message', resolve));
  await sleep(300);
  const cpu = process.cpuUsage(cpu0);
  if (!out) {
    const latencies = [];
    let incomplete = 0;
    for (let k = Math.min(5, N); k < N; k++) {
      if (count[k] === S) latencies.push((lastAt[k] - times[k]) / 1e6);
      else incomplete++;
    }
    latencies.sort((a, b) => a - b);
    const at = (p) =>
      latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))];
    console.log(
      JSON.stringify({
        server: serverKind,
        client: clientKind,
        subscribers: S,
        messages: N,
        p50Ms: at(50),
        p90Ms: at(90),
        p99Ms: at(99),
        serverCpuUsPerMessage: Math.round(cpuUs / N),
        clientCpuUsPerMessage: Math.round((cpu.user + cpu.system) / N),
        // Split: the kernel's share (reading the sockets) is alike for every client; the
        // difference between clients is in user time.
        clientUserUsPerMessage: Math.round(cpu.user / N),
        clientSystemUsPerMessage: Math.round(cpu.system / N),
        incomplete,
      }),
    );
  }
  await Promise.all(closers.map((close) => close()));
  child.send({ exit: true });
  await new Promise((resolve) => child.once('exit', resolve));
}

if (process.argv[2] === '--server') await serve(process.argv[3]);
else await main();

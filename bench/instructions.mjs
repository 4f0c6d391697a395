// Instructions per unit of work, counted by valgrind's callgrind: the same count run after run,
// where CPU time on a shared two-core machine moves by a fifth between rounds, so a change of a
// few percent in what a call or a message costs can be seen. User-space instructions only: the
// kernel's work (the system calls, the loopback) is not in them.
//
//   node bench/instructions.mjs [--only server|connect|client] [--calls N] [--connects N]
//     [--messages N] [--top N]
//
// server: one connection, one call in flight (as rr-1x1). The server process of a contestant
//   (raw `ws` echo and this gateway, as bench/contestants make them) runs under callgrind; this
//   process is the load, the bench's raw client on `ws`. After 60,000 calls (every function on
//   the path optimized by then) the counters are zeroed, --calls calls are made on the same
//   connection (default 5,000) and the counters read: the server's instructions per call.
// connect: connections opened to the same two servers, 20 handshakes at a time from this
//   process (after 2,000 opened and closed), --connects of them counted (default 3,000): the
//   server's instructions per connection opened, its handshake and what it sets up for the
//   connection.
// client: fan-out messages handed to one client on a stand-in socket (bench/stand-in-socket.mjs,
//   no socket at all): createClient's subscription against a raw client that JSON.parses each
//   message: 300,000 messages, then --messages counted (default 50,000: enough that the
//   collector's occasional major pass is shared out, as it is in a long run). Instructions per
//   message, the stand-in's own included in both.
// --top N: the N functions with the most instructions of their own, per call or message, the
//   JIT's named from Node's --perf-basic-prof map (a function's count includes what was inlined
//   into it).
// Needs valgrind (Debian's package); runs in a few minutes; not in CI.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = fileURLToPath(import.meta.url);
const WARM_CALLS = 60_000;
const WARM_MESSAGES = 300_000;
const WARM_CONNECTS = 2_000;
const OUTER_FRAMES =
  /below main|node::Start\(|NodeMainInstance::Run|SpinEventLoopInternal|start_thread|clone\.S/;
const CHILD_ENV = { ...process.env, WS_NO_BUFFER_UTIL: '1', WS_NO_UTF_8_VALIDATE: '1' };

const { values: opts } = parseArgs({
  options: {
    only: { type: 'string' },
    calls: { type: 'string', default: '5000' },
    messages: { type: 'string', default: '50000' },
    connects: { type: 'string', default: '3000' },
    // The children's: how many units before counting, how many counted.
    warm: { type: 'string' },
    count: { type: 'string' },
    top: { type: 'string', default: '0' },
    child: { type: 'string' },
    variant: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});

if (opts.child === 'server') await serverChild(opts.variant);
else if (opts.child === 'client') await clientChild(opts.variant);
else await main();

// ---- children (run under callgrind) -------------------------------------------------------

/** Lines from the parent, one at a time. */
function parentLines() {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  return async () => (await lines.next()).value;
}

async function serverChild(id) {
  const { default: contestant } = await import(`./contestants/${id}.mjs`);
  const server = await contestant.start('127.0.0.1');
  const next = parentLines();
  console.log(`ready ${server.port} ${contestant.client.path}`);
  await next(); // "end"
  await server.close();
  process.exit(0);
}

async function clientChild(variant) {
  const { fanFrame, StandInSocket } = await import('./stand-in-socket.mjs');
  let onData;
  let socket;
  if (variant === 'own') {
    const { createClient } = await import(process.env.CLIENT_MODULE ?? 'wsrpc-gateway/client');
    const client = createClient({
      url: 'ws://stand-in/rpc',
      WebSocket: StandInSocket,
      reconnect: false,
      // Under callgrind a stretch of messages outlasts the heartbeat's timeout before the
      // stand-in's answer to its ping is read; no message's cost is in it.
      heartbeat: false,
    });
    await client.opened();
    socket = StandInSocket.last;
    client.subscribe('bench').subscribe((data) => onData(data.k));
  } else {
    socket = new StandInSocket();
    socket.listener = (text) => {
      const k = JSON.parse(text).params?.result?.k;
      if (k !== undefined) onData(k);
    };
  }
  let expected = 0;
  onData = (k) => {
    if (k !== ++expected) throw new Error(`message ${k} where ${expected} was due`);
  };
  await new Promise((resolve) => setTimeout(resolve, 50));
  let k = 0;
  const push = async (n) => {
    for (let i = 0; i < n; i++) {
      socket.deliver(fanFrame(++k));
      // Let timers and I/O run now and then, as between a socket's reads.
      if (i % 10_000 === 9_999) await new Promise((resolve) => setImmediate(resolve));
    }
  };
  const next = parentLines();
  await push(Number(opts.warm));
  console.log('ready');
  await next(); // "go"
  const before = expected;
  await push(Number(opts.count));
  if (expected - before !== Number(opts.count))
    throw new Error(`${expected - before} of ${opts.count} messages reached the subscriber`);
  console.log('done');
  await next(); // "end"
  process.exit(0);
}

// ---- the parent ---------------------------------------------------------------------------

/** A child under callgrind: its pid (the same as Node's inside it), its lines, its dump. */
function underCallgrind(args, dir) {
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '-q',
      // The main thread's instructions alone: the collector's helper threads run when they
      // are woken, which differs from run to run.
      '--separate-threads=yes',
      `--callgrind-out-file=${join(dir, 'cg.%p')}`,
      // The JIT writes and rewrites code: valgrind must look for it everywhere but in files.
      '--smc-check=all-non-file',
      process.execPath,
      '--perf-basic-prof',
      here,
      ...args,
    ],
    { env: CHILD_ENV, stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  // A child that has ended (or failed) closes the pipe: what it said is in `stderr`.
  child.stdin.on('error', () => undefined);
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    pid: child.pid,
    async line() {
      const { value, done } = await lines.next();
      if (done) throw new Error(`the child ended: ${stderr.slice(-2_000)}`);
      return value;
    },
    send: (line) => child.stdin.write(`${line}\n`),
    control(flag) {
      const r = spawnSync('callgrind_control', [flag, String(child.pid)], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`callgrind_control ${flag}: ${r.stderr}`);
    },
    async end() {
      if (child.exitCode === null) child.stdin.write('end\n');
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The main thread's counters callgrind dumped for `pid` (its first dump: `control('-d')`'s). */
function readDump(dir, pid) {
  const file = readdirSync(dir).find((name) => name === `cg.${pid}.1-01`);
  if (!file) throw new Error(`no callgrind dump for ${pid} in ${dir}`);
  const path = join(dir, file);
  const text = readFileSync(path, 'utf8');
  const total = Number(/^(?:summary|totals): (\d+)/m.exec(text)?.[1]);
  return { path, total };
}

/** The `top` functions by their own instructions, JIT code named from the perf map. */
function topFunctions(dumpPath, pid, units, top) {
  const annotated = spawnSync('callgrind_annotate', ['--threshold=100', dumpPath], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  }).stdout;
  const map = [];
  try {
    for (const line of readFileSync(`/tmp/perf-${pid}.map`, 'utf8').split('\n')) {
      const [start, size, ...name] = line.split(' ');
      if (name.length) map.push([parseInt(start, 16), parseInt(size, 16), name.join(' ')]);
    }
  } finally {
    rmSync(`/tmp/perf-${pid}.map`, { force: true });
  }
  map.sort((a, b) => a[0] - b[0]);
  const nameAt = (address) => {
    let lo = 0;
    let hi = map.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (map[mid][0] <= address) lo = mid + 1;
      else hi = mid - 1;
    }
    const entry = map[hi];
    return entry && address < entry[0] + entry[1] ? entry[2] : undefined;
  };
  const costs = new Map();
  for (const line of annotated.split('\n')) {
    const m = /^\s*([\d,]+) \([\s\d.]+%\)\s+(.*?)(?: \[.*\])?$/.exec(line);
    if (!m || line.includes('PROGRAM TOTALS')) continue;
    let name = m[2];
    const jit = /^\?\?\?:0x([0-9a-f]+)/.exec(name);
    if (jit) name = nameAt(parseInt(jit[1], 16));
    // Left out: code with no name, and the frames every thread's work is under (callgrind
    // gives them what it cannot put in a function of the JIT's).
    if (!name || OUTER_FRAMES.test(name)) continue;
    costs.set(name, (costs.get(name) ?? 0) + Number(m[1].replaceAll(',', '')));
  }
  return [...costs]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(
      ([name, cost]) =>
        `  ${Math.round(cost / units)
          .toLocaleString('en-US')
          .padStart(7)}  ${name.replace(/^JS:/, '').slice(0, 120)}`,
    );
}

/** One call at a time on one connection: `n` calls of sum. */
async function calls(ws, n, first) {
  let i = 0;
  await new Promise((resolve, reject) => {
    ws.onmessage = ({ data }) => {
      if (!String(data).includes('"result"')) return reject(new Error(`answered ${data}`));
      if (++i >= n) resolve();
      else send();
    };
    const send = () =>
      ws.send(`{"jsonrpc":"2.0","method":"sum","params":[${first + i},2],"id":${first + i}}`);
    send();
  });
}

async function measureServer(id, dir, warm, count, top) {
  const { default: WebSocket } = await import('ws');
  const child = underCallgrind(['--child', 'server', '--variant', id], dir);
  try {
    const [, port, path] = (await child.line()).split(' ');
    const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`, { perMessageDeflate: false });
    await new Promise((resolve, reject) => {
      ws.onopen = resolve;
      ws.onerror = reject;
    });
    await calls(ws, warm, 0);
    child.control('-z');
    await calls(ws, count, warm);
    child.control('-d');
    ws.close();
    const { path: dump, total } = readDump(dir, child.pid);
    return { perUnit: total / count, top: top ? topFunctions(dump, child.pid, count, top) : [] };
  } finally {
    await child.end();
  }
}

/** `n` connections opened, `inFlight` handshakes at a time; resolves with the open sockets. */
async function openConnections(WebSocket, url, n, inFlight = 20) {
  const sockets = [];
  let started = 0;
  await new Promise((resolve, reject) => {
    const next = () => {
      if (started === n) {
        if (sockets.length === n) resolve();
        return;
      }
      started++;
      const ws = new WebSocket(url, { perMessageDeflate: false });
      ws.onopen = () => {
        sockets.push(ws);
        next();
      };
      ws.onerror = (event) => reject(event.error ?? new Error('connection refused'));
    };
    for (let i = 0; i < inFlight; i++) next();
  });
  return sockets;
}

async function measureConnects(id, dir, warm, count, top) {
  const { default: WebSocket } = await import('ws');
  const child = underCallgrind(['--child', 'server', '--variant', id], dir);
  try {
    const [, port, path] = (await child.line()).split(' ');
    const url = `ws://127.0.0.1:${port}${path}`;
    for (const ws of await openConnections(WebSocket, url, warm)) ws.terminate();
    // Their closes are served before the count starts (under callgrind, tens of times slower).
    await new Promise((resolve) => setTimeout(resolve, 20_000));
    child.control('-z');
    const sockets = await openConnections(WebSocket, url, count);
    child.control('-d');
    for (const ws of sockets) ws.terminate();
    const { path: dump, total } = readDump(dir, child.pid);
    return { perUnit: total / count, top: top ? topFunctions(dump, child.pid, count, top) : [] };
  } finally {
    await child.end();
  }
}

async function measureClient(variant, dir, warm, count, top) {
  const child = underCallgrind(
    ['--child', 'client', '--variant', variant, '--warm', String(warm), '--count', String(count)],
    dir,
  );
  try {
    await child.line(); // ready
    child.control('-z');
    child.send('go');
    await child.line(); // done
    child.control('-d');
    const { path: dump, total } = readDump(dir, child.pid);
    return { perUnit: total / count, top: top ? topFunctions(dump, child.pid, count, top) : [] };
  } finally {
    await child.end();
  }
}

async function main() {
  if (opts.help) {
    console.log(
      'node bench/instructions.mjs [--only server|connect|client] [--calls N] [--connects N] [--messages N] [--top N]',
    );
    return;
  }
  if (spawnSync('valgrind', ['--version']).status !== 0) {
    console.error('bench/instructions.mjs needs valgrind (apt-get install -y valgrind)');
    process.exit(2);
  }
  const top = Number(opts.top);
  const dir = mkdtempSync(join(tmpdir(), 'wsrpc-instructions-'));
  const rows = [];
  const print = (what, unit, base, ours) => {
    rows.push(
      `| ${what} | ${Math.round(base.perUnit).toLocaleString('en-US')} | ${Math.round(ours.perUnit).toLocaleString('en-US')} | ${(ours.perUnit / base.perUnit).toFixed(2)}× | per ${unit} |`,
    );
    for (const [name, r] of [
      ['baseline', base],
      ['this project', ours],
    ]) {
      if (r.top.length)
        console.log(
          `${what}, ${name}: top functions (instructions per ${unit})\n${r.top.join('\n')}`,
        );
    }
  };
  try {
    if (opts.only === undefined || opts.only === 'server') {
      const calls = Number(opts.calls);
      const base = await measureServer('ws-echo', dir, WARM_CALLS, calls, top);
      const ours = await measureServer('gateway', dir, WARM_CALLS, calls, top);
      print('server, one call in flight (raw `ws` echo · the gateway)', 'call', base, ours);
    }
    if (opts.only === undefined || opts.only === 'connect') {
      const connects = Number(opts.connects);
      const base = await measureConnects('ws-echo', dir, WARM_CONNECTS, connects, top);
      const ours = await measureConnects('gateway', dir, WARM_CONNECTS, connects, top);
      print('server, connection opened (raw `ws` · the gateway)', 'connection', base, ours);
    }
    if (opts.only === undefined || opts.only === 'client') {
      const messages = Number(opts.messages);
      const base = await measureClient('raw', dir, WARM_MESSAGES, messages, top);
      const ours = await measureClient('own', dir, WARM_MESSAGES, messages, top);
      print(
        'client, fan-out message (raw client parsing it · createClient)',
        'message',
        base,
        ours,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `\nCommand: \`${['node bench/instructions.mjs', ...process.argv.slice(2)].join(' ')}\``,
  );
  console.log(
    '| what | baseline | this project | ratio | unit |\n| --- | ---: | ---: | ---: | --- |',
  );
  console.log(rows.join('\n'));
}

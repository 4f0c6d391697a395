// A bounded soak test of the built gateway (dist/src/index.js): `npm run soak`, or
// `node scripts/soak.mjs [--connections 3000] [--seconds 60] [--rate 1500] [--publish-ms 5]`.
//
// The gateway runs in a child process (this same file with `--server`, under --expose-gc)
// and answers `stats` requests over the IPC channel: process.memoryUsage(), the number of
// active resources (process.getActiveResourcesInfo().length, by kind) and its session count.
// This process, on 127.0.0.1 only:
//   1. warm-up: opens a few hundred connections with the same traffic and closes them, so
//      JIT code and one-time caches are already in the baseline;
//   2. "before": forces GC in the server and samples it;
//   3. opens --connections connections and, for --seconds, sends mixed traffic: calls (sync,
//      async, failing), notifications, batches, topic subscribe/unsubscribe, per-subscriber
//      streams, calls the server makes back to the client, rpc.ping; the server publishes to
//      the topics every --publish-ms; a few connections per second are cut and reopened;
//   4. "peak": waits for every reply, forces GC and samples (the highest un-collected sample
//      seen while holding the connections is printed too);
//   5. closes every connection (one in ten cut without a closing handshake), waits for the
//      server to settle, forces GC and samples "after".
//
// Verdict (exit 1 when any fails):
//   - heapUsed after <= heapUsed before * 1.2 + 10 MiB (GC is forced before both samples;
//     the slack absorbs allocator and code-cache noise; at the defaults about 4,000 sessions
//     come and go, warm-up and churn included, so a leak of ~3 KiB per session exceeds it);
//   - active resources after <= before + 5 (listening socket, IPC pipe and the heartbeat
//     timer are in both; every socket, timer or stream left behind by a closed connection
//     would add one);
//   - no session is left, every connection opened, and every request got its reply.
// Exit 2 on a setup error, 3 if the watchdog (seconds + 180 s) fires. Every loop is bounded
// in count and time; the script stops by itself.

import { fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket } from 'ws';

const SELF = fileURLToPath(import.meta.url);
const DIST = new URL('../dist/src/index.js', import.meta.url);
const HOST = '127.0.0.1';
const MiB = 1024 * 1024;

/** Tolerances of the verdict (see the header). */
const HEAP_GROWTH_RATIO = 0.2;
const HEAP_GROWTH_BYTES = 10 * MiB;
const HANDLE_SLACK = 5;

const ROOMS = 50;
const MAX_SUBSCRIPTIONS_PER_CONNECTION = 3;

// ---------------------------------------------------------------------------
// The server (child process)
// ---------------------------------------------------------------------------

async function runServer() {
  const { createGateway, InvalidParamsError } = await import(DIST.href);
  const { interval, map, take } = await import('rxjs');
  const connections = Number(process.env.SOAK_CONNECTIONS) || 3_000;
  const publishMs = Number(process.env.SOAK_PUBLISH_MS) || 5;
  const silent = {
    trace() {},
    debug() {},
    info() {},
    warn() {},
    error() {},
    child: () => silent,
  };
  const gateway = createGateway({
    logger: silent,
    heartbeatInterval: 5_000,
    callTimeout: 5_000,
    limits: {
      maxConnections: connections * 2 + 1_000,
      maxConnectionsPerIp: connections * 2 + 1_000,
      ratePerSecond: 0,
    },
  });
  let notes = 0;
  gateway.method('echo', (params) => params);
  gateway.method('sum', (params) =>
    Array.isArray(params) ? params.reduce((a, b) => a + b, 0) : 0,
  );
  gateway.method('slow', async (params, ctx) => {
    await sleep(2 + (Number(params?.[0]) % 8 || 0), undefined, { signal: ctx.signal });
    return 'slow';
  });
  gateway.method('fail', () => {
    throw new InvalidParamsError('always fails');
  });
  gateway.method('note', () => {
    notes++;
  });
  // The server calls back into the calling client and returns its answer.
  gateway.method('callMe', (params, ctx) => ctx.session.call('client.echo', params));
  gateway.topic('ticks');
  gateway.topic('room.*', { slowConsumer: 'drop' });
  gateway.stream('countdown', (params) => {
    const from = Math.min(Math.max(Number(params?.from) || 3, 1), 20);
    return interval(100).pipe(
      take(from + 1),
      map((i) => from - i),
    );
  });

  let publisher;
  let published = 0;
  let publishFailures = 0;
  const startPublisher = () => {
    if (publisher) return;
    let tick = 0;
    publisher = setInterval(() => {
      tick++;
      const topic = tick % 50 === 0 ? 'ticks' : `room.${tick % ROOMS}`;
      published++;
      gateway.publish(topic, { tick, at: Date.now() }).catch(() => publishFailures++);
    }, publishMs);
  };
  const stopPublisher = () => {
    clearInterval(publisher);
    publisher = undefined;
  };

  const collect = async () => {
    for (let i = 0; i < 4; i++) {
      globalThis.gc();
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  const snapshot = () => {
    const memory = process.memoryUsage();
    const resources = process.getActiveResourcesInfo();
    const kinds = {};
    for (const kind of resources) kinds[kind] = (kinds[kind] ?? 0) + 1;
    let subscribers = 0;
    for (const n of Object.values(gateway.pubsub.topics())) subscribers += n;
    return {
      rss: memory.rss,
      heapUsed: memory.heapUsed,
      heapTotal: memory.heapTotal,
      external: memory.external,
      handles: resources.length,
      kinds,
      sessions: gateway.sessions.size,
      subscribers,
      notes,
      published,
      publishFailures,
    };
  };

  // Never outlive the parent: no IPC channel, no reason to run.
  process.once('disconnect', () => process.exit(0));
  process.on('message', (msg) => {
    const reply = (body) => process.send({ id: msg.id, ...body });
    const handle = async () => {
      switch (msg.cmd) {
        case 'stats':
          if (msg.gc) await collect();
          return reply({ stats: snapshot() });
        case 'publisher':
          if (msg.on) startPublisher();
          else stopPublisher();
          return reply({ ok: true });
        case 'close':
          stopPublisher();
          await gateway.close({ timeoutMs: 2_000 });
          reply({ ok: true });
          process.disconnect();
          return undefined;
        default:
          return reply({ error: `unknown command ${msg.cmd}` });
      }
    };
    handle().catch((err) => reply({ error: String(err?.stack ?? err) }));
  });

  const { port } = await gateway.listen(0, HOST);
  process.send({ type: 'ready', port });
}

// ---------------------------------------------------------------------------
// The load generator (parent process)
// ---------------------------------------------------------------------------

function readOptions() {
  const { values } = parseArgs({
    options: {
      connections: { type: 'string', default: '3000' },
      seconds: { type: 'string', default: '60' },
      rate: { type: 'string', default: '1500' },
      'publish-ms': { type: 'string', default: '5' },
    },
  });
  const int = (name, min, max) => {
    const n = Number(values[name]);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new Error(`--${name} must be an integer from ${min} to ${max}`);
    }
    return n;
  };
  return {
    connections: int('connections', 1, 20_000),
    seconds: int('seconds', 1, 3_600),
    rate: int('rate', 1, 100_000),
    publishMs: int('publish-ms', 1, 10_000),
  };
}

/** The child process and a request/response channel over its IPC. */
async function startServer(options) {
  const child = fork(SELF, ['--server'], {
    execArgv: ['--expose-gc'],
    env: {
      ...process.env,
      SOAK_CONNECTIONS: String(options.connections),
      SOAK_PUBLISH_MS: String(options.publishMs),
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting = new Map();
  let nextId = 0;
  let exited = false;
  const exit = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      exited = true;
      for (const { reject } of waiting.values()) reject(new Error('the server exited'));
      resolve({ code, signal });
    }),
  );
  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the server did not start in 15 s')), 15_000);
    child.on('message', (msg) => {
      if (msg?.type === 'ready') {
        clearTimeout(timer);
        resolve(msg.port);
        return;
      }
      const pending = waiting.get(msg?.id);
      if (!pending) return;
      waiting.delete(msg.id);
      if (msg.error) pending.reject(new Error(msg.error));
      else pending.resolve(msg);
    });
    void exit.then(() => reject(new Error('the server exited before it was ready')));
  });
  const request = (cmd, extra = {}, timeoutMs = 30_000) =>
    new Promise((resolve, reject) => {
      if (exited) return reject(new Error('the server has exited'));
      const id = ++nextId;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`no answer to ${cmd} in ${timeoutMs} ms`));
      }, timeoutMs);
      waiting.set(id, {
        resolve: (msg) => {
          clearTimeout(timer);
          resolve(msg);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      });
      child.send({ id, cmd, ...extra });
    });
  const port = await ready;
  return {
    port,
    child,
    stats: async (gc) => (await request('stats', { gc })).stats,
    publisher: (on) => request('publisher', { on }),
    async stop() {
      if (!exited) {
        await request('close', {}, 15_000).catch(() => undefined);
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exit;
        clearTimeout(timer);
      }
      return exit;
    },
    kill: () => child.kill('SIGKILL'),
  };
}

const NOTIFICATION_HEAD = '{"jsonrpc":"2.0","method":"subscription"';

/** Traffic counters, shared by every connection. */
function newCounters() {
  return {
    requests: 0,
    replies: 0,
    errorReplies: 0,
    unexpectedReplies: 0,
    notifications: 0,
    batches: 0,
    subscribed: 0,
    unsubscribed: 0,
    subscribeRefused: 0,
    streams: 0,
    subscriptionMessages: 0,
    serverCalls: 0,
    framesIn: 0,
    bytesIn: 0,
    connectFailures: 0,
    churned: 0,
  };
}

class Connection {
  constructor(socket, counters) {
    this.socket = socket;
    this.counters = counters;
    this.nextId = 0;
    /** Request id -> what it was ('call', or 'subscribe:<topic>', 'unsubscribe'). */
    this.pending = new Map();
    /** Subscription id -> topic. */
    this.subscriptions = new Map();
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => undefined);
    socket.on('message', (data) => this.receive(data));
  }

  get isOpen() {
    return this.socket.readyState === 1;
  }

  receive(data) {
    const counters = this.counters;
    counters.framesIn++;
    counters.bytesIn += data.length;
    const text = data.toString('utf8');
    if (text.startsWith(NOTIFICATION_HEAD)) {
      counters.subscriptionMessages++;
      return;
    }
    let value;
    try {
      value = JSON.parse(text);
    } catch {
      counters.unexpectedReplies++;
      return;
    }
    for (const message of Array.isArray(value) ? value : [value]) this.handle(message);
  }

  handle(message) {
    const counters = this.counters;
    if (typeof message?.method === 'string') {
      // A call from the server (callMe): answer it.
      if (message.id !== undefined) {
        counters.serverCalls++;
        this.send({ jsonrpc: '2.0', result: message.params ?? null, id: message.id });
      }
      return;
    }
    const kind = this.pending.get(message?.id);
    if (kind === undefined) {
      counters.unexpectedReplies++;
      return;
    }
    this.pending.delete(message.id);
    counters.replies++;
    if (message.error) {
      counters.errorReplies++;
      if (kind.startsWith('subscribe:')) counters.subscribeRefused++;
      return;
    }
    if (kind.startsWith('subscribe:') && typeof message.result === 'string') {
      this.subscriptions.set(message.result, kind.slice('subscribe:'.length));
      counters.subscribed++;
    }
  }

  send(message) {
    if (this.isOpen) this.socket.send(JSON.stringify(message));
  }

  request(method, params, kind = 'call') {
    const id = ++this.nextId;
    this.pending.set(id, kind);
    this.counters.requests++;
    return { jsonrpc: '2.0', method, params, id };
  }

  /** One step of mixed traffic; `r` in [0, 1) picks what. */
  step(r) {
    const c = this.counters;
    if (r < 0.35) {
      const methods = ['echo', 'sum', 'slow', 'fail'];
      const method = methods[Math.floor(r * 100) % methods.length];
      this.send(this.request(method, [this.nextId % 7, 2, 3]));
    } else if (r < 0.5) {
      c.notifications++;
      this.send({ jsonrpc: '2.0', method: 'note', params: { n: this.nextId } });
    } else if (r < 0.65) {
      c.batches++;
      this.send([
        this.request('sum', [1, 2]),
        { jsonrpc: '2.0', method: 'note', params: [1] },
        this.request('echo', { batch: true }),
      ]);
    } else if (r < 0.8) {
      if (this.subscriptions.size < MAX_SUBSCRIPTIONS_PER_CONNECTION) {
        const topic = r < 0.7 ? 'ticks' : `room.${Math.floor(r * 10_000) % ROOMS}`;
        this.send(this.request('subscribe', [topic], `subscribe:${topic}`));
      } else {
        const [id] = this.subscriptions.keys();
        this.subscriptions.delete(id);
        c.unsubscribed++;
        this.send(this.request('unsubscribe', [id], 'unsubscribe'));
      }
    } else if (r < 0.85) {
      c.streams++;
      this.send(this.request('subscribe', ['countdown', { from: 5 }], 'subscribe:countdown'));
    } else if (r < 0.92) {
      this.send(this.request('callMe', { hello: this.nextId }));
    } else {
      this.send(this.request('rpc.ping'));
    }
  }
}

function openConnection(url, counters, timeoutMs) {
  return new Promise((resolve) => {
    const socket = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    socket.once('open', () => resolve(new Connection(socket, counters)));
    socket.once('error', () => {
      counters.connectFailures++;
      resolve(undefined);
    });
  });
}

/** Open `count` connections, `concurrency` at a time, within `deadline` (ms since epoch). */
async function openMany(url, count, counters, deadline, concurrency = 100) {
  const out = [];
  let started = 0;
  const worker = async () => {
    while (started < count && Date.now() < deadline) {
      started++;
      const conn = await openConnection(url, counters, Math.max(1_000, deadline - Date.now()));
      if (conn) out.push(conn);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return out;
}

const TIMED_OUT = Symbol('timed out');

/** `promise`, or TIMED_OUT after `ms`; leaves no timer behind either way. */
async function within(promise, ms) {
  const timeout = new AbortController();
  try {
    return await Promise.race([promise, sleep(ms, TIMED_OUT, { signal: timeout.signal })]);
  } finally {
    timeout.abort();
  }
}

/** Close every connection (one in ten cut without a handshake) and wait, at most `ms`. */
async function closeAll(connections, ms) {
  connections.forEach((conn, i) => {
    if (i % 10 === 0) conn.socket.terminate();
    else conn.socket.close(1000, 'soak over');
  });
  const all = Promise.all(connections.map((conn) => conn.closed));
  if ((await within(all, ms)) === TIMED_OUT) {
    for (const conn of connections) conn.socket.terminate();
    await within(all, 2_000);
  }
}

/** Mixed traffic on `connections` for `ms`, at `rate` messages per second. */
async function drive(connections, ms, rate, counters, url, churnPerSecond, onSample) {
  const tickMs = 10;
  const perTick = Math.max(1, Math.round((rate * tickMs) / 1000));
  const end = Date.now() + ms;
  let cursor = 0;
  let lastChurn = Date.now();
  let lastSample = Date.now();
  // Bounded: at most ms / tickMs ticks (each tick awaits at least tickMs).
  for (let tick = 0; tick < Math.ceil(ms / tickMs) + 1 && Date.now() < end; tick++) {
    for (let i = 0; i < perTick && connections.length > 0; i++) {
      cursor = (cursor + 1) % connections.length;
      const conn = connections[cursor];
      if (conn.isOpen) conn.step(Math.random());
    }
    if (churnPerSecond > 0 && Date.now() - lastChurn >= 1_000) {
      lastChurn = Date.now();
      for (let i = 0; i < churnPerSecond; i++) {
        const index = Math.floor(Math.random() * connections.length);
        const old = connections[index];
        if (i % 2 === 0) old.socket.terminate();
        else old.socket.close(1000, 'churn');
        counters.churned++;
        const fresh = await openConnection(url, counters, 5_000);
        if (fresh) connections[index] = fresh;
      }
    }
    if (onSample && Date.now() - lastSample >= 2_000) {
      lastSample = Date.now();
      await onSample();
    }
    await sleep(tickMs);
  }
}

/** Wait (at most `ms`) until every open connection has its replies. */
async function awaitReplies(connections, ms) {
  const deadline = Date.now() + ms;
  const outstanding = () =>
    connections.reduce((n, conn) => n + (conn.isOpen ? conn.pending.size : 0), 0);
  while (outstanding() > 0 && Date.now() < deadline) await sleep(50);
  return outstanding();
}

const mib = (bytes) => `${(bytes / MiB).toFixed(1)} MiB`;

function row(label, s) {
  return [
    label.padEnd(24),
    mib(s.rss).padStart(11),
    mib(s.heapUsed).padStart(11),
    String(s.handles).padStart(8),
    String(s.sessions).padStart(9),
    String(s.subscribers).padStart(12),
  ].join(' ');
}

function kinds(s) {
  return Object.entries(s.kinds)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([kind, n]) => `${kind}=${n}`)
    .join(' ');
}

async function runParent() {
  const options = readOptions();
  if (!existsSync(DIST)) throw new Error('dist/src/index.js is missing: run `npm run build` first');

  const started = Date.now();
  const server = await startServer(options);
  const watchdogMs = (options.seconds + 180) * 1_000 + options.connections * 20;
  const watchdog = setTimeout(() => {
    console.error(`soak: watchdog fired after ${watchdogMs} ms; killing the server`);
    server.kill();
    process.exit(3);
  }, watchdogMs);
  watchdog.unref();

  const url = `ws://${HOST}:${server.port}/rpc`;
  console.log(
    `soak: ${options.connections} connections for ${options.seconds} s on ${url}, ` +
      `~${options.rate} messages/s, a publish every ${options.publishMs} ms`,
  );

  let exitCode = 0;
  try {
    // 1. Warm-up.
    const warmCounters = newCounters();
    const warmCount = Math.min(300, options.connections);
    await server.publisher(true);
    const warm = await openMany(url, warmCount, warmCounters, Date.now() + 30_000);
    await drive(warm, 2_000, Math.min(options.rate, 1_000), warmCounters, url, 0);
    await server.publisher(false);
    await awaitReplies(warm, 10_000);
    await closeAll(warm, 10_000);
    await settle(server, Infinity, 15_000);

    // 2. Before.
    const before = await server.stats(true);

    // 3. Hold the connections with traffic.
    const counters = newCounters();
    const openDeadline = Date.now() + 60_000 + options.connections * 20;
    const t0 = Date.now();
    const connections = await openMany(url, options.connections, counters, openDeadline);
    const openMs = Date.now() - t0;
    const opened = connections.length;
    let highest = await server.stats(false);
    const sample = async () => {
      const s = await server.stats(false);
      if (s.heapUsed > highest.heapUsed) highest = s;
    };
    await server.publisher(true);
    const churn = Math.max(1, Math.ceil(options.connections / 200));
    await drive(connections, options.seconds * 1_000, options.rate, counters, url, churn, sample);
    await server.publisher(false);
    const lost = await awaitReplies(connections, 15_000);
    const openAtPeak = connections.filter((c) => c.isOpen).length;
    const peakRaw = await server.stats(false);
    if (peakRaw.heapUsed > highest.heapUsed) highest = peakRaw;
    const peak = await server.stats(true);

    // 4. Close everything and let the server settle.
    await closeAll(connections, 30_000);
    const settled = await settle(server, before.handles + HANDLE_SLACK, 30_000);
    const after = await server.stats(true);

    // 5. Report.
    const heapLimit = before.heapUsed * (1 + HEAP_GROWTH_RATIO) + HEAP_GROWTH_BYTES;
    const handleLimit = before.handles + HANDLE_SLACK;
    const checks = [
      [
        `heapUsed after ${mib(after.heapUsed)} <= ${mib(heapLimit)} (before x ${1 + HEAP_GROWTH_RATIO} + ${mib(HEAP_GROWTH_BYTES)})`,
        after.heapUsed <= heapLimit,
      ],
      [
        `active handles after ${after.handles} <= ${handleLimit} (before + ${HANDLE_SLACK})`,
        after.handles <= handleLimit,
      ],
      [`sessions after ${after.sessions} = 0`, after.sessions === 0],
      [`connections opened ${opened} = ${options.connections}`, opened === options.connections],
      [`requests without a reply ${lost} = 0`, lost === 0],
      [
        `replies to unknown ids ${counters.unexpectedReplies} = 0`,
        counters.unexpectedReplies === 0,
      ],
    ];
    const header = [
      'phase'.padEnd(24),
      'rss'.padStart(11),
      'heapUsed'.padStart(11),
      'handles'.padStart(8),
      'sessions'.padStart(9),
      'subscribers'.padStart(12),
    ].join(' ');
    const c = counters;
    console.log('');
    console.log(header);
    console.log(row('before (after GC)', before));
    console.log(row('peak, highest sampled', highest));
    console.log(row('peak (after GC)', peak));
    console.log(row('after (after GC)', after));
    console.log('');
    console.log(`handles before: ${kinds(before)}`);
    console.log(`handles at peak: ${kinds(peak)}`);
    console.log(`handles after: ${kinds(after)}`);
    console.log(
      `retained per connection at peak: ${((peak.heapUsed - before.heapUsed) / Math.max(1, openAtPeak) / 1024).toFixed(1)} KiB heap`,
    );
    console.log('');
    console.log(
      `connections: ${opened} opened in ${(openMs / 1000).toFixed(1)} s, ${openAtPeak} open at the end, ` +
        `${c.churned} cut or closed and reopened during the run, ${c.connectFailures} failed to connect`,
    );
    console.log(
      `traffic: ${c.requests} requests (${c.replies} replies, ${c.errorReplies} of them errors), ` +
        `${c.notifications} notifications, ${c.batches} batches, ${c.subscribed} subscriptions accepted ` +
        `(${c.subscribeRefused} refused), ${c.unsubscribed} unsubscribes, ${c.streams} streams, ` +
        `${c.serverCalls} server-to-client calls answered`,
    );
    console.log(
      `received: ${c.framesIn} frames (${mib(c.bytesIn)}), ${c.subscriptionMessages} subscription messages; ` +
        `server: ${after.published} publishes (${after.publishFailures} failed), ${after.notes} notifications handled`,
    );
    if (!settled) console.log('note: the server had not settled within 30 s of the close');
    console.log('');
    for (const [text, ok] of checks) console.log(`${ok ? 'ok  ' : 'FAIL'} ${text}`);
    const failed = checks.filter(([, ok]) => !ok).length;
    exitCode = failed === 0 ? 0 : 1;
    console.log(
      `\nsoak ${failed === 0 ? 'PASSED' : `FAILED (${failed} check(s))`} in ${((Date.now() - started) / 1000).toFixed(0)} s`,
    );
  } finally {
    const exit = await server.stop();
    clearTimeout(watchdog);
    if (exit.code !== 0 && exit.signal === null) {
      console.error(`soak: the server exited with code ${exit.code}`);
      exitCode ||= 2;
    }
  }
  return exitCode;
}

/** Poll the server (at most `ms`) until no session is left and handles are at most `handles`. */
async function settle(server, handles, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const s = await server.stats(false);
    if (s.sessions === 0 && s.handles <= handles) return true;
    await sleep(250);
  }
  return false;
}

// Last, so that every class and constant above is initialized before either side runs.
if (process.argv[2] === '--server') {
  await runServer();
} else {
  process.exitCode = await runParent().catch((err) => {
    console.error(`soak: ${err?.stack ?? err}`);
    return 2;
  });
}

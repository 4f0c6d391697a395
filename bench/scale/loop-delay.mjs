// What the heartbeat's pings and a big topic's fan-out cost the event loop, where every other
// connection's calls wait: a gateway (the package's build, or SCALE_GATEWAY_MODULE: another
// build, for a before-and-after) with N idle WebSocket connections, opened by a child process from
// 127.0.0.2 and up (where `ws` answers every ping itself). Over a window it measures the event
// loop's delay (p50, p99, max; perf_hooks, 1 ms resolution) and the server's CPU.
//
// - Heartbeat: a short interval makes each slice of it hold as many connections as far more of
//   them do at the default 30 s (an interval is cut into up to 100 slices of at least 100 ms:
//   10,000 connections at 1,000 ms make slices of 1,000, as 100,000 do at 30 s).
// - --publish-per-second P: every connection subscribes to one topic, and the server publishes P
//   messages a second to it, paced; the load counts what each connection receives (every one
//   must get every message published in the window, or the run fails).
//
//   node bench/scale/loop-delay.mjs [--connections N] [--interval-ms I] [--seconds S]
//     [--publish-per-second P]
//
// Prints one JSON line. Bounded: at most 60,000 connections, 120 s of window and 100 publishes a
// second, and a watchdog ends the run (and its child) after the window plus two minutes.
import { fork } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { benchLimits } from '../gateway-limits.mjs';

const HOST = '127.0.0.1';
const HANDSHAKES_IN_FLIGHT = 100;
const TOPIC = 'all';

const { values: opts } = parseArgs({
  options: {
    connections: { type: 'string', default: '10000' },
    'interval-ms': { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '10' },
    'publish-per-second': { type: 'string', default: '0' },
    child: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
const usage =
  'node bench/scale/loop-delay.mjs [--connections N] [--interval-ms I] [--seconds S] [--publish-per-second P]';
if (opts.help) {
  console.log(usage);
  process.exit(0);
}
const N = Number(opts.connections);
const INTERVAL_MS = Number(opts['interval-ms']);
const SECONDS = Number(opts.seconds);
const PER_SECOND = Number(opts['publish-per-second']);
if (
  !(N >= 1 && N <= 60_000) ||
  !(INTERVAL_MS >= 100) ||
  !(SECONDS >= 1 && SECONDS <= 120) ||
  !(PER_SECOND >= 0 && PER_SECOND <= 100)
) {
  console.error(
    `${usage}\n--connections 1..60000, --interval-ms at least 100, --seconds 1..120, --publish-per-second 0..100`,
  );
  process.exit(2);
}

if (opts.child !== undefined) {
  // The load: N connections, left open; with publishes, each subscribed and counting messages.
  const port = Number(opts.child);
  const sockets = [];
  let started = 0;
  let ready = 0;
  let received = 0;
  const isReady = () => {
    if (++ready === N) process.send?.('ready');
  };
  const next = () => {
    while (started - sockets.length < HANDSHAKES_IN_FLIGHT && started < N) {
      started++;
      const ws = new WebSocket(`ws://${HOST}:${port}/rpc`, {
        localAddress: `127.0.0.${2 + (started % 8)}`,
        perMessageDeflate: false,
      });
      ws.on('open', () => {
        sockets.push(ws);
        if (PER_SECOND > 0) {
          ws.send(JSON.stringify({ jsonrpc: '2.0', method: 'subscribe', params: [TOPIC], id: 1 }));
        } else isReady();
        next();
      });
      ws.on('message', (data) => {
        const text = data.toString();
        if (text.includes('"id":1')) isReady();
        else if (text.includes('"seq"')) received++;
      });
      ws.on('error', (err) => {
        console.error(`connection failed: ${err.message}`);
        process.exit(1);
      });
    }
  };
  next();
  process.on('message', (asked) => {
    if (asked === 'count') process.send?.({ received });
  });
} else {
  const watchdog = setTimeout(
    () => {
      console.error('watchdog: the run did not finish');
      process.exit(1);
    },
    (SECONDS + 120) * 1_000,
  );
  const { createGateway } = await import(process.env.SCALE_GATEWAY_MODULE ?? 'wsrpc-gateway');
  const { pino } = await import('pino');
  const gateway = createGateway({
    logger: pino({ level: 'warn' }),
    heartbeatIntervalMs: INTERVAL_MS,
    limits: { ...benchLimits, maxConnections: N + 1_000, maxConnectionsPerIp: N + 1_000 },
  });
  gateway.topic(TOPIC);
  const { port } = await gateway.listen(0, HOST);
  const load = fork(new URL(import.meta.url).pathname, [
    '--child',
    String(port),
    '--connections',
    String(N),
    '--interval-ms',
    String(INTERVAL_MS),
    '--seconds',
    String(SECONDS),
    '--publish-per-second',
    String(PER_SECOND),
  ]);
  const stop = () => load.kill('SIGKILL');
  process.on('exit', stop);
  const fromLoad = (what) =>
    new Promise((resolve, reject) => {
      load.once('message', resolve);
      load.once('exit', (code) => reject(new Error(`the load exited ${code} before ${what}`)));
    });
  await fromLoad('every connection was ready');
  // Measuring the heartbeat, a whole interval first: every connection has been pinged once.
  await new Promise((resolve) => setTimeout(resolve, PER_SECOND > 0 ? 1_000 : INTERVAL_MS + 500));
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const cpuBefore = process.cpuUsage();
  let published = 0;
  const publisher =
    PER_SECOND > 0
      ? setInterval(() => {
          published++;
          gateway.publish(TOPIC, { k: published, price: 97_000.25 }).catch((err) => {
            console.error(`publish failed: ${err.message}`);
            process.exit(1);
          });
        }, 1_000 / PER_SECOND)
      : undefined;
  await new Promise((resolve) => setTimeout(resolve, SECONDS * 1_000));
  clearInterval(publisher);
  delay.disable();
  const cpu = process.cpuUsage(cpuBefore);
  let received = 0;
  if (PER_SECOND > 0) {
    // Every message of the window to every connection, then the count.
    for (let tries = 0; tries < 120 && received < published * N; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      load.send('count');
      ({ received } = await fromLoad('the count'));
    }
  }
  const ms = (ns) => Math.round(ns / 1e4) / 100;
  console.log(
    JSON.stringify({
      connections: gateway.sessions.size,
      intervalMs: INTERVAL_MS,
      seconds: SECONDS,
      ...(PER_SECOND > 0 ? { published, delivered: received } : {}),
      cpuMsPerSecond: Math.round((cpu.user + cpu.system) / SECONDS / 100) / 10,
      loopDelayMs: {
        p50: ms(delay.percentile(50)),
        p99: ms(delay.percentile(99)),
        max: ms(delay.max),
      },
    }),
  );
  clearTimeout(watchdog);
  stop();
  await gateway.close({ timeoutMs: 1_000 });
  process.exit(PER_SECOND > 0 && received !== published * N ? 1 : 0);
}

// What the heartbeat's pings cost the event loop: a gateway (the package's build, or
// SCALE_GATEWAY_MODULE: another build, for a before-and-after) with N idle WebSocket connections
// and a short heartbeat interval, so that each slice of the interval holds as many connections as
// far more of them do at the default 30 s (an interval is cut into up to 100 slices of at least
// 100 ms: 10,000 connections at 1,000 ms make slices of 1,000, as 100,000 do at 30 s). Over a
// window of whole intervals it measures the event loop's delay (p50, p99, max; perf_hooks, 1 ms
// resolution) and the server's CPU. The connections are opened by a child process from
// 127.0.0.2 and up, where `ws` answers every ping itself.
//
//   node bench/scale/heartbeat-delay.mjs [--connections N] [--interval-ms I] [--seconds S]
//
// Prints one JSON line. Bounded: at most 60,000 connections and 120 s of window, and a watchdog
// ends the run (and its child) after the window plus two minutes.
import { fork } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { benchLimits } from '../gateway-limits.mjs';

const HOST = '127.0.0.1';
const HANDSHAKES_IN_FLIGHT = 100;

const { values: opts } = parseArgs({
  options: {
    connections: { type: 'string', default: '10000' },
    'interval-ms': { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '10' },
    child: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (opts.help) {
  console.log(
    'node bench/scale/heartbeat-delay.mjs [--connections N] [--interval-ms I] [--seconds S]',
  );
  process.exit(0);
}
const N = Number(opts.connections);
const INTERVAL_MS = Number(opts['interval-ms']);
const SECONDS = Number(opts.seconds);
if (!(N >= 1 && N <= 60_000) || !(INTERVAL_MS >= 100) || !(SECONDS >= 1 && SECONDS <= 120)) {
  console.error('--connections 1..60000, --interval-ms at least 100, --seconds 1..120');
  process.exit(2);
}

if (opts.child !== undefined) {
  // The load: N connections, left open and idle; pongs are `ws`'s own answer to each ping.
  const port = Number(opts.child);
  let started = 0;
  let open = 0;
  const next = () => {
    while (started - open < HANDSHAKES_IN_FLIGHT && started < N) {
      started++;
      const ws = new WebSocket(`ws://${HOST}:${port}/rpc`, {
        localAddress: `127.0.0.${2 + (started % 8)}`,
        perMessageDeflate: false,
      });
      ws.on('open', () => {
        open++;
        if (open === N) process.send?.('open');
        next();
      });
      ws.on('error', (err) => {
        console.error(`connection failed: ${err.message}`);
        process.exit(1);
      });
    }
  };
  next();
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
  ]);
  const stop = () => load.kill('SIGKILL');
  process.on('exit', stop);
  await new Promise((resolve, reject) => {
    load.once('message', resolve);
    load.once('exit', (code) => reject(new Error(`the load exited ${code}`)));
  });
  // A whole interval first: every connection has been pinged once before the window.
  await new Promise((resolve) => setTimeout(resolve, INTERVAL_MS + 500));
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const cpuBefore = process.cpuUsage();
  await new Promise((resolve) => setTimeout(resolve, SECONDS * 1_000));
  delay.disable();
  const cpu = process.cpuUsage(cpuBefore);
  const ms = (ns) => Math.round(ns / 1e4) / 100;
  console.log(
    JSON.stringify({
      connections: gateway.sessions.size,
      intervalMs: INTERVAL_MS,
      seconds: SECONDS,
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
  process.exit(0);
}

// A contestant's server process: loads one adapter from bench/contestants, and answers
// the runner's control requests over IPC: its CPU time and memory, publish N messages
// to the "bench" topic, exit. An adapter that runs part of its server in processes of its
// own (the two-node contestants) reports their CPU time through `helperCpuUs()`, and `cpu`
// adds it: the server CPU of a slice is then every server process's. The gateway-mode adapters
// get the URL of the upstream they route to (bench/upstream.mjs, started by the runner); the
// presence adapters have a `probe` (bench/presence-probe.mjs) the presence commands read.
import { nowMs, serve } from './ipc.mjs';

let server;

/**
 * Publish messages first..first+n-1: `burst` per event-loop turn, the turns back to back
 * (setImmediate) or, with `intervalMs`, on a fixed schedule (turn i at start + i × intervalMs,
 * so the offered rate does not depend on how long a publish takes).
 */
function publish({ first, n, burst, intervalMs, size = 0 }) {
  const book = orderBook(size);
  const end = first + n;
  let k = first;
  let turns = 0;
  let lastAt = 0;
  /** Paced (intervalMs > 0): when each turn published, for each message's own latency. */
  const times = intervalMs > 0 ? [] : undefined;
  const startedAt = nowMs();
  return new Promise((resolve, reject) => {
    const turn = () => {
      turns++;
      times?.push(nowMs());
      try {
        for (let i = 0; i < burst && k < end; i++, k++) {
          if (k === end - 1) lastAt = nowMs();
          server.publish(
            book
              ? { k, price: 97_000.25, symbol: 'BTC-USD', book }
              : { k, price: 97_000.25, symbol: 'BTC-USD' },
          );
        }
      } catch (err) {
        reject(err);
        return;
      }
      if (k >= end) resolve({ startedAt, lastAt, endedAt: nowMs(), times });
      else if (intervalMs > 0)
        setTimeout(turn, Math.max(0, startedAt + turns * intervalMs - nowMs()));
      else setImmediate(turn);
    };
    turn();
  });
}

/**
 * With `size`, what fills a message to about that many bytes of JSON: price levels of an order
 * book (numbers that differ a little from level to level, as compressible as market data).
 */
function orderBook(size) {
  if (size <= 0) return undefined;
  const levels = [];
  for (let i = 0; JSON.stringify(levels).length < size - 60; i++) {
    levels.push({ price: 97_000.25 - i * 0.25, qty: ((i * 7_919) % 10_000) / 100 });
  }
  return levels;
}

function probe() {
  if (!server?.probe) throw new Error('this contestant has no presence probe');
  return server.probe;
}

function collectGarbage() {
  if (typeof globalThis.gc !== 'function') return false;
  for (let i = 0; i < 4; i++) globalThis.gc();
  return true;
}

serve({
  async start({ id, host, upstreamUrl }) {
    const { default: contestant } = await import(`./contestants/${id}.mjs`);
    server = await contestant.start(host, { upstreamUrl });
    return { port: server.port, pid: process.pid };
  },
  async cpu() {
    const { user, system } = process.cpuUsage();
    const t = nowMs();
    const helpers = server?.helperCpuUs ? await server.helperCpuUs() : 0;
    return { us: user + system + helpers, t };
  },
  async memory({ gc }) {
    // Let pending close/timer work settle, then collect before reading.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const collected = gc ? collectGarbage() : false;
    return { ...process.memoryUsage(), collected };
  },
  publish,
  /**
   * Resolve once `count` subscriptions to "bench" are live, for the contestants whose clients do
   * not tell when the server accepted them (`awaitSubscribers` of the adapter); at once for the others.
   */
  async awaitSubscribers({ count, timeoutMs }) {
    if (!server?.awaitSubscribers) return { live: undefined };
    return { live: await server.awaitSubscribers(count, timeoutMs) };
  },
  // The presence scenario's readings (bench/presence-probe.mjs), from the contestants that have one.
  presenceBegin: () => probe().begin(),
  presenceSnapshot: () => probe().snapshot(),
  presenceSettle: (args) => probe().settle(args),
  async exit() {
    let timer;
    const deadline = new Promise((resolve) => (timer = setTimeout(resolve, 2_000)));
    await Promise.race([server?.close(), deadline]);
    clearTimeout(timer);
  },
});

// A contestant's server process: loads one adapter from bench/contestants, and answers
// the runner's control requests over IPC: its CPU time and memory, publish N messages
// to the "bench" topic, exit.
import { nowMs, serve } from './ipc.mjs';

let server;

/** Publish messages first..first+n-1: `burst` per event-loop turn, turns `intervalMs` apart (0: back to back). */
function publish({ first, n, burst, intervalMs }) {
  const end = first + n;
  let k = first;
  let lastAt = 0;
  const startedAt = nowMs();
  return new Promise((resolve, reject) => {
    const turn = () => {
      try {
        for (let i = 0; i < burst && k < end; i++, k++) {
          if (k === end - 1) lastAt = nowMs();
          server.publish({ k, price: 97_000.25, symbol: 'BTC-USD' });
        }
      } catch (err) {
        reject(err);
        return;
      }
      if (k >= end) resolve({ startedAt, lastAt, endedAt: nowMs() });
      else if (intervalMs > 0) setTimeout(turn, intervalMs);
      else setImmediate(turn);
    };
    turn();
  });
}

function collectGarbage() {
  if (typeof globalThis.gc !== 'function') return false;
  for (let i = 0; i < 4; i++) globalThis.gc();
  return true;
}

serve({
  async start({ id, host }) {
    const { default: contestant } = await import(`./contestants/${id}.mjs`);
    server = await contestant.start(host);
    return { port: server.port, pid: process.pid };
  },
  cpu() {
    const { user, system } = process.cpuUsage();
    return { us: user + system, t: nowMs() };
  },
  async memory({ gc }) {
    // Let pending close/timer work settle, then collect before reading.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const collected = gc ? collectGarbage() : false;
    return { ...process.memoryUsage(), collected };
  },
  publish,
  async exit() {
    let timer;
    const deadline = new Promise((resolve) => (timer = setTimeout(resolve, 2_000)));
    await Promise.race([server?.close(), deadline]);
    clearTimeout(timer);
  },
});

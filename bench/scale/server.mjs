// A scale-run server process: one contestant (bench/scale/contestants.mjs), answering the
// runner over IPC: its CPU time, its memory (after a full collection), and publishes
// stamped with the shared monotonic clock (bench/ipc.mjs nowMs).
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { nowMs, serve } from '../ipc.mjs';
import { starters } from './contestants.mjs';
import { settledMemory } from './settled-memory.mjs';

let server;
/** Event-loop delay between `loopStart` and `loopRead`. */
let loop;

const cpuUs = () => {
  const { user, system } = process.cpuUsage();
  return user + system;
};

/** `n` messages to `topicAt(i)`, `perTurn` per event-loop turn, the turns back to back. */
function publishMany({ n, perTurn, topicAt, k }) {
  const startedAt = nowMs();
  let i = 0;
  return new Promise((resolve, reject) => {
    const turn = () => {
      try {
        for (let j = 0; j < perTurn && i < n; j++, i++) {
          server.publish(topicAt(i), server.message(k + i, nowMs()));
        }
      } catch (err) {
        reject(err);
        return;
      }
      if (i >= n) resolve({ startedAt, endedAt: nowMs() });
      else setImmediate(turn);
    };
    turn();
  });
}

serve({
  async start({ kind, host, connections, broker }) {
    server = await starters[kind](host, { connections, broker });
    return { port: server.port, pid: process.pid };
  },
  cpu: () => ({ us: cpuUs(), t: nowMs() }),
  // Let close and timer work settle, then collect before reading.
  memory: () => settledMemory(100),
  loopStart() {
    loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    return null;
  },
  /** The longest and the 99th-percentile event-loop delay since `loopStart`, in ms. */
  loopRead() {
    loop.disable();
    return { maxMs: loop.max / 1e6, p99Ms: loop.percentile(99) / 1e6 };
  },
  /** One message to `topic`; its `t` is when it was handed to the server's publish. */
  publishOne({ topic, k }) {
    const t = nowMs();
    server.publish(topic, server.message(k, t));
    return { t };
  },
  /** `n` messages to `topic`, numbered from `k`, one per turn. */
  publishBurst: ({ topic, k, n }) => publishMany({ n, perTurn: 1, topicAt: () => topic, k }),
  /** One message to each of the topics `prefix`0 .. `prefix`(count-1), `perTurn` per turn, numbered from `k`. */
  publishTopics: ({ prefix, count, k, perTurn }) =>
    publishMany({ n: count, perTurn, topicAt: (i) => prefix + i, k }),
  /**
   * One message to each of the topics `prefix`0 .. `prefix`(count-1), before they have
   * subscribers, `concurrency` publishes awaited at a time: what a broker makes for a topic on
   * its first publish (a NATS stream, a Redis counter) is made here, once, not in the measured
   * passes. Resolves with the time it took and how many publishes failed.
   */
  async prepareTopics({ prefix, count, k, concurrency }) {
    const startedAt = nowMs();
    let next = 0;
    let failed = 0;
    const worker = async () => {
      while (next < count) {
        const i = next++;
        await server.prepare(prefix + i, server.message(k + i, nowMs())).catch(() => failed++);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    return { ms: nowMs() - startedAt, failed };
  },
  async exit() {
    let timer;
    const deadline = new Promise((resolve) => (timer = setTimeout(resolve, 3_000)));
    await Promise.race([server?.close(), deadline]);
    clearTimeout(timer);
  },
});

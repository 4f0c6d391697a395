// Node B of a two-node contestant (bench/contestants/gateway-cluster.mjs): a process of its
// own, forked by node A's server process, with its own broker connections. It answers over
// IPC: start (the gateway on a free port), cpu (its process.cpuUsage()), exit. It exits with
// its parent (ipc.mjs `serve`).
import { nowMs, serve } from './ipc.mjs';

let node;
let broker;

serve({
  async start({ id, host, tag }) {
    const { default: contestant } = await import(`./contestants/${id}.mjs`);
    const { startNode } = await import('./contestants/gateway-cluster.mjs');
    broker = await contestant.connect(tag);
    node = await startNode(host, broker);
    return { port: node.port, pid: process.pid };
  },
  cpu() {
    const { user, system } = process.cpuUsage();
    return { us: user + system, t: nowMs() };
  },
  async exit() {
    let timer;
    const deadline = new Promise((resolve) => (timer = setTimeout(resolve, 2_000)));
    await Promise.race([
      (async () => {
        await node?.gateway.close({ timeoutMs: 1_000 });
        await broker?.close();
      })(),
      deadline,
    ]);
    clearTimeout(timer);
  },
});

// The server processes of a scale run over several nodes (--nodes), answering the steps of
// bench/scale/phases.mjs as one server would: CPU time summed over the nodes (and the broker's,
// read from /proc, when the nodes share one), memory summed, the event loop's delays the worst
// node's. A publish goes through the first node when the nodes share a topic space through a
// broker (the broker brings it to the others); otherwise (raw ws) every node is handed it at
// once and fans it out to its own connections, the harness acting as the broker, and the
// publish time is the earliest node's.
import { cpuUsOf } from './local-brokers.mjs';

const PUBLISHES = new Set(['publishOne', 'publishBurst', 'publishTopics', 'prepareTopics']);

export class ServerGroup {
  /**
   * `servers`: ScaleChild handles; `sharedTopics`: whether they share a topic space through a
   * broker; `brokerPid`: that broker's process, whose CPU is counted with theirs.
   */
  constructor(servers, { sharedTopics, brokerPid }) {
    this.servers = servers;
    this.sharedTopics = sharedTopics;
    this.brokerPid = brokerPid;
  }

  async request(cmd, args, timeoutMs) {
    const { servers } = this;
    if (PUBLISHES.has(cmd) && this.sharedTopics) {
      return servers[0].request(cmd, args, timeoutMs);
    }
    const answers = await Promise.all(servers.map((s) => s.request(cmd, args, timeoutMs)));
    switch (cmd) {
      case 'cpu': {
        const broker = cpuUsOf(this.brokerPid) ?? 0;
        return { us: answers.reduce((a, r) => a + r.us, broker), t: answers[0].t };
      }
      case 'memory': {
        const total = {};
        for (const [key, value] of Object.entries(answers[0])) {
          total[key] = typeof value === 'number' ? answers.reduce((a, r) => a + r[key], 0) : value;
        }
        return total;
      }
      case 'loopRead':
        return {
          maxMs: Math.max(...answers.map((r) => r.maxMs)),
          p99Ms: Math.max(...answers.map((r) => r.p99Ms)),
        };
      case 'publishOne':
        return { t: Math.min(...answers.map((r) => r.t)) };
      case 'publishBurst':
      case 'publishTopics':
        return {
          startedAt: Math.min(...answers.map((r) => r.startedAt)),
          endedAt: Math.max(...answers.map((r) => r.endedAt)),
        };
      default:
        return answers[0];
    }
  }
}

// How long and how much: the full run and the quick one (`--quick`, about 3 minutes).
// Every count here bounds a loop; every duration bounds a wait.

const full = {
  rounds: 5,
  // Request/response slices: load runs warmupMs unmeasured, then windowMs measured.
  requests: { warmupMs: 500, windowMs: 2_000 },
  // Fan-out: per subscriber count, a burst run (`burst` publishes per event-loop turn,
  // turns back to back) and a paced run (one publish per turn, intervalMs apart). The paced
  // interval is longer than one message takes to reach every subscriber (the load process reads
  // all of them on one core, about 10 µs a delivery): each message's latency is its own, not
  // the backlog of the ones before it, which the bursts measure.
  fanout: {
    100: { burst: { n: 2_000, burst: 10 }, paced: { n: 400, intervalMs: 5 } },
    1000: { burst: { n: 400, burst: 10 }, paced: { n: 120, intervalMs: 25 } },
  },
  memory: { connections: 2_000 },
  // Presence: `members` connections (spread over `sourceAddresses` loopback addresses from
  // 127.0.0.2 up, so repeated slices do not run out of ephemeral ports) join the presence
  // topic `wave` at a time, then leave the same way.
  presence: { members: 10_000, wave: 1_000, sourceAddresses: 10 },
  // Compression: fan-out of `n` messages of about `size` bytes, `burst` per turn.
  deflate: { subscribers: 1_000, n: 200, burst: 10, size: 4_096 },
  // Before the first round: a short unmeasured run of every contestant, so round 1 is not
  // the only one that pays for JIT compilation.
  warmup: { requestMs: 500, fanoutMessages: 100, presenceMembers: 500 },
  watchdogMs: 45 * 60_000,
};

const quick = {
  rounds: 3,
  requests: { warmupMs: 200, windowMs: 700 },
  fanout: {
    100: { burst: { n: 600, burst: 10 }, paced: { n: 150, intervalMs: 5 } },
    1000: { burst: { n: 120, burst: 10 }, paced: { n: 40, intervalMs: 25 } },
  },
  memory: { connections: 2_000 },
  presence: { members: 10_000, wave: 1_000, sourceAddresses: 10 },
  deflate: { subscribers: 1_000, n: 60, burst: 10, size: 4_096 },
  warmup: { requestMs: 200, fanoutMessages: 50, presenceMembers: 500 },
  watchdogMs: 8 * 60_000,
};

export function settingsFor({ quick: isQuick, rounds }) {
  const settings = structuredClone(isQuick ? quick : full);
  if (rounds) settings.rounds = rounds;
  return settings;
}

export const HOST = '127.0.0.1';

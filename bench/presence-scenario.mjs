// The presence scenario: `members` connections (10,000) join one topic and leave it again, each
// phase in waves, against a gateway with the topic declared with presence and against the same
// gateway and topic without it (the baseline), on the MemoryBroker and on Redis. The connections
// are opened before and closed after, outside the measured phases, so a phase's server CPU is
// what the subscribes (or unsubscribes) cost, presence included: from before the first wave
// until the store holds every change and one more coalescing window has passed (the last event
// emitted). Broker traffic and events are read in the server process (bench/presence-probe.mjs).
import { sleep } from './ipc.mjs';

/** The gateway's default presenceCoalesceMs: a phase ends two windows after the store is right. */
const COALESCE_MS = 250;
const QUIET_MS = 2 * COALESCE_MS;

const common = [
  { key: 'cpuJoinUs', label: 'server CPU µs/join', format: 'sig' },
  { key: 'cpuLeaveUs', label: 'server CPU µs/leave', format: 'sig' },
  { key: 'writesPerK', label: 'store writes/1k joins', format: 'sig' },
  { key: 'messagesPerK', label: '$presence msgs/1k joins', format: 'sig' },
];
const tail = [
  { key: 'eventsPerSec', label: 'events/s under churn', format: 'sig' },
  { key: 'countMs', label: 'count() right, ms after last join', format: 'sig' },
];
const redisTraffic = [
  { key: 'redisCommandsPerK', label: 'commands sent/1k joins', format: 'sig', ratio: false },
  { key: 'redisBytesPerJoin', label: 'bytes sent/join', format: 'sig', ratio: false },
  { key: 'redisCallsPerJoin', label: 'Redis calls/join', format: 'sig', ratio: false },
];

export function presenceScenario(settings) {
  const n = settings.presence.members;
  const id = `presence-${n % 1000 === 0 ? `${n / 1000}k` : n}`;
  const members = n.toLocaleString('en-US');
  const about = (broker) =>
    `One topic, ${members} connections opened first (unmeasured); each subscribes to it, ` +
    `${settings.presence.wave.toLocaleString('en-US')} subscribes sent at once and the next wave ` +
    'once they are answered, then each unsubscribes the same way. ' +
    `${broker} Per phase, server CPU from the first wave until the store holds every change ` +
    `plus ${QUIET_MS} ms (the last coalesced event), divided by ${members}; ` +
    'broker traffic of the join phase, counted in the server process; events: ' +
    '`gateway.presence(topic).events$` in the same process, per second from the first wave to ' +
    "the phase's last event; count() right: when the store write carrying the last join resolved, " +
    'after the last subscribe reply reached the client (negative: before it). ' +
    '× no presence: the figure divided by the same gateway’s without presence, same round.';
  const table = (suffix, title, baselineId, contestantIds, figures, broker) => ({
    id: `${id}-${suffix}`,
    title: `Presence: ${members} members joining and leaving one topic, ${title}`,
    about: about(broker),
    figures,
    baselineId,
    contestantIds,
    ratioLabel: '× no presence',
  });
  return {
    id,
    kind: 'presence',
    tables: [
      table(
        'memory',
        'MemoryBroker',
        'gateway-presence-off',
        ['gateway-presence-off', 'gateway-presence'],
        [...common, ...tail],
        'MemoryBroker: writes and messages are calls in process.',
      ),
      table(
        'redis',
        'Redis',
        'gateway-redis-presence-off',
        ['gateway-redis-presence-off', 'gateway-redis-presence'],
        [...common, ...redisTraffic, ...tail],
        'Redis: one gateway node on RedisBroker; commands and bytes sent as ioredis sends them ' +
          '(a Lua script is one command); Redis calls: what Redis executed (INFO commandstats, ' +
          'the calls inside scripts included; from every client of that Redis, so other users ' +
          'of it add theirs).',
      ),
    ],
    run: async (ctx, contestant) => {
      const { values, problems } = await runPresence(ctx, contestant, n);
      return [{ table: `${id}-${contestant.broker}`, values, problems }];
    },
  };
}

/** One phase: every connection joins (or leaves); the server's readings around it. */
async function phase(ctx, contestant, action, expected) {
  const { loadgen, settings } = ctx;
  const { child } = ctx.server(contestant);
  const { members: before } = await child.request('presenceBegin');
  const [s0, c0] = await Promise.all([child.request('presenceSnapshot'), child.request('cpu')]);
  const wave = await loadgen.request(
    'presenceWave',
    { action, wave: settings.presence.wave },
    180_000,
  );
  const settled = await child.request(
    'presenceSettle',
    { expected, quietMs: QUIET_MS, timeoutMs: 30_000 },
    40_000,
  );
  const [s1, c1] = await Promise.all([child.request('presenceSnapshot'), child.request('cpu')]);
  const delta = (key) => s1[key] - s0[key];
  const events = delta('events');
  return {
    before,
    wave,
    settled,
    cpuUs: c1.us - c0.us,
    writes: delta('writes'),
    messages: delta('messages'),
    redisCommands: delta('redisCommands'),
    redisBytes: delta('redisBytes'),
    redisCalls: delta('redisCalls'),
    events,
    eventSpanMs: events > 0 ? s1.lastEventAt - wave.startedAt : 0,
  };
}

function problemsOf(name, p, expected, presence) {
  const problems = [];
  if (p.wave.refused > 0)
    problems.push(
      `${p.wave.refused} ${name}s refused or failed, the first: ${p.wave.refusedSample}`,
    );
  if (!presence) return problems;
  if (p.settled.countAt === undefined)
    problems.push(`the store never reached ${expected} members (${p.settled.members})`);
  if (p.settled.count !== expected)
    problems.push(`count() was ${p.settled.count} after the ${name}s, not ${expected}`);
  return problems;
}

/** Open `n` connections, join, leave, close; the figures of the slice. */
export async function runPresence(ctx, contestant, n) {
  const { loadgen, settings } = ctx;
  const { url } = ctx.server(contestant);
  const { presence } = contestant;
  await loadgen.request(
    'openMembers',
    {
      url,
      client: contestant.client,
      count: n,
      sourceAddresses: settings.presence.sourceAddresses,
    },
    300_000,
  );
  let join, leave;
  try {
    await sleep(100);
    join = await phase(ctx, contestant, 'join', n);
    leave = await phase(ctx, contestant, 'leave', 0);
  } finally {
    await loadgen.request('closeMembers', {}, 60_000);
  }
  const problems = [
    ...(join.before !== 0 ? [`the topic had ${join.before} members before the joins`] : []),
    ...problemsOf('join', join, n, presence),
    ...problemsOf('leave', leave, 0, presence),
  ];
  const span = join.eventSpanMs + leave.eventSpanMs;
  const values = {
    cpuJoinUs: join.cpuUs / n,
    cpuLeaveUs: leave.cpuUs / n,
    writesPerK: (join.writes * 1000) / n,
    messagesPerK: (join.messages * 1000) / n,
    redisCommandsPerK: (join.redisCommands * 1000) / n,
    redisBytesPerJoin: join.redisBytes / n,
    redisCallsPerJoin: join.redisCalls / n,
    eventsPerSec: presence && span > 0 ? (join.events + leave.events) / (span / 1000) : undefined,
    countMs:
      presence && join.settled.countAt !== undefined
        ? join.settled.countAt - join.wave.lastAt
        : undefined,
  };
  return { values, problems };
}

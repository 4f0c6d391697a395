// The scale run's table: one row per figure, one column per contestant, and the ratio of the
// first contestant to the last (gateway ÷ raw ws) where both measured it.

const KB = 1024;
const fmt = (value, digits = 3) => {
  if (typeof value !== 'number' || !Number.isFinite(value)) return '—';
  if (Math.abs(value) >= 10 ** digits) return Math.round(value).toLocaleString('en-US');
  return Number(value.toPrecision(digits)).toLocaleString('en-US', { maximumFractionDigits: 3 });
};
/** Memory growth between two readings, per unit, in KB. */
const per = (after, before, key, count) =>
  after && before && count ? (after[key] - before[key]) / count / KB : undefined;

function rows({ connections, nodes = 1, settings, subscriptions }) {
  const n = connections.toLocaleString('en-US');
  const t = settings.topics.toLocaleString('en-US');
  const all = [
    ['**Connect storm**'],
    ['connections open', (r) => r.storm?.opened, { noRatio: true }],
    ['failed handshakes', (r) => r.storm?.failed, { noRatio: true }],
    [`time to all ${n} open (s)`, (r) => r.storm && r.storm.openMs / 1000],
    ['server CPU per connection opened (µs)', (r) => r.storm?.cpuPerConnUs],
    [
      nodes > 1
        ? `**Memory per connection at ${n}** (the ${nodes} server processes together, minus them empty)`
        : `**Memory per connection at ${n}** (server process, minus the empty process)`,
    ],
    ['RSS per connection (KB)', (r) => per(r.open, r.base, 'rss', r.storm?.opened)],
    ['heap used per connection (KB)', (r) => per(r.open, r.base, 'heapUsed', r.storm?.opened)],
    [
      'heap used per connection, compiled code aside (KB)',
      (r) => per(r.open, r.base, 'heapNoCode', r.storm?.opened),
    ],
    [
      'external + array buffers per connection (bytes)',
      (r) =>
        r.open && r.base && r.storm
          ? (r.open.external + r.open.arrayBuffers - r.base.external - r.base.arrayBuffers) /
            r.storm.opened
          : undefined,
    ],
    [`**${n} connections idle for ${settings.idleMs / 1000} s**`],
    ['longest event-loop delay (ms)', (r) => r.idle?.maxMs],
    ['event-loop delay p99 (ms)', (r) => r.idle?.p99Ms],
    ['server CPU while idle (ms per second)', (r) => r.idle?.cpuMsPerSecond],
    ['the same with no connection open (ms per second)', (r) => r.emptyIdle?.cpuMsPerSecond],
    [
      "idle CPU per connection per second, the empty server's taken off (µs)",
      (r) =>
        r.idle && r.emptyIdle && r.storm
          ? ((r.idle.cpuMsPerSecond - r.emptyIdle.cpuMsPerSecond) * 1000) / r.storm.opened
          : undefined,
    ],
    [`**One topic, ${n} subscribers**`],
    [
      'heap per subscription (KB)',
      (r) => per(r.allMem, r.open, 'heapUsed', r.allSub?.subscriptions),
    ],
    [
      `paced message (${settings.messages}): publish to last delivery, median (ms)`,
      (r) => r.paced?.toLastMedianMs,
    ],
    ['paced message: publish to last delivery, worst (ms)', (r) => r.paced?.toLastMaxMs],
    ['paced message: delivery latency p50 (ms)', (r) => r.paced?.p50Ms],
    ['paced message: delivery latency p99 (ms)', (r) => r.paced?.p99Ms],
    ['paced: server CPU per delivery (µs)', (r) => r.paced?.cpuPerDeliveryUs],
    [`burst of ${settings.burst}: server CPU per delivery (µs)`, (r) => r.burst?.cpuPerDeliveryUs],
    [`burst of ${settings.burst}: first publish to last delivery (ms)`, (r) => r.burst?.spanMs],
    [`burst of ${settings.burst}: deliveries per second`, (r) => r.burst?.deliveriesPerSecond],
    [
      `**${t} topics × ${settings.perTopic} subscribers** (${subscriptions.toLocaleString('en-US')} subscriptions)`,
    ],
    [
      'heap per topic, its subscriptions included (KB)',
      (r) => per(r.topicMem, r.unsubMem, 'heapUsed', settings.topics),
    ],
    [
      'RSS per topic, its subscriptions included (KB)',
      (r) => per(r.topicMem, r.unsubMem, 'rss', settings.topics),
    ],
    [
      `server CPU per publish to a ${settings.perTopic}-subscriber topic (µs)`,
      (r) => r.topicPasses?.cpuPerPublishUs,
    ],
    [
      `one message to each of the ${t} topics: first publish to last delivery (ms)`,
      (r) => r.topicPasses?.spanMs,
    ],
  ];
  // --topics 0: the many-topics step did not run.
  return settings.topics > 0
    ? all
    : all.slice(
        0,
        all.findIndex(([label]) => label.includes(' topics × ')),
      );
}

export function renderTable(run) {
  const { results, kinds } = run;
  const cols = kinds.map((k) => results.get(k));
  const ratioOf = cols.length > 1 ? [cols[0], cols[cols.length - 1]] : undefined;
  const header = ['figure', ...cols.map((r) => r.name)];
  if (ratioOf) header.push(`${ratioOf[0].name} ÷ ${ratioOf[1].name}`);
  const lines = [
    `| ${header.join(' | ')} |`,
    `| ${header.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ')} |`,
  ];
  for (const [label, get, { noRatio } = {}] of rows(run)) {
    if (!get) {
      lines.push(`| ${label} |${' |'.repeat(header.length - 1)}`);
      continue;
    }
    const values = cols.map((r) => get(r));
    const cells = [label, ...values.map((v) => fmt(v))];
    if (ratioOf) {
      const a = get(ratioOf[0]);
      const b = get(ratioOf[1]);
      cells.push(noRatio || !b ? '' : `${fmt(a / b, 2)}×`);
    }
    lines.push(`| ${cells.join(' | ')} |`);
  }
  const head = [
    '',
    `Command: \`${run.command}\` (${run.date}, ${run.minutes} min)`,
    `Machine: ${run.machine}; ${run.loadCount} load processes on the same machine.`,
    ...run.notes.map((n) => `Note: ${n}.`),
    '',
  ];
  const tail = run.problems.length
    ? ['', 'Problems:', ...run.problems.map((p) => `- ${p}`), '']
    : [''];
  return [...head, ...lines, ...tail].join('\n') + '\n';
}

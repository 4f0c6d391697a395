// Turns the per-round figures into markdown tables, and writes them into docs/benchmarks.md
// between the results markers, with the command, the date and the machine.
import os from 'node:os';
import { readFile, writeFile } from 'node:fs/promises';
import { ratioSummary, summarize } from './stats.mjs';

export const RESULTS_START = '<!-- bench:results:start -->';
export const RESULTS_END = '<!-- bench:results:end -->';

export function machineInfo() {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown CPU',
    cores: cpus.length,
    memoryGiB: os.totalmem() / 2 ** 30,
    node: process.version,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
  };
}

/** Three significant digits (no exponent), or a grouped integer for rates. */
function formatNumber(value, format) {
  if (typeof value !== 'number' || !Number.isFinite(value)) return '—';
  if (format === 'int') return Math.round(value).toLocaleString('en-US');
  const abs = Math.abs(value);
  if (abs >= 100) return Math.round(value).toLocaleString('en-US');
  if (abs >= 10) return value.toFixed(1);
  if (abs >= 1) return value.toFixed(2);
  return value.toFixed(3);
}

function formatRatio(value) {
  return typeof value === 'number' && Number.isFinite(value) ? value.toFixed(2) : '—';
}

function markdownTable(header, rows) {
  const line = (cells) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/**
 * One table: a row per contestant, and per figure its median, min–max and ratio to the baseline:
 * the table's own (`table.baselineId`, its column named `table.ratioLabel`) or the run's; a
 * figure with `ratioTo` is divided by that other figure of the baseline, and one with
 * `ratio: false` has none (a count the baseline has next to nothing of). A figure with
 * `ratioAgainst: 'client'` (its column named `f.ratioLabel`) is divided by the same figure of the
 * row's `clientBaselineId` (the same server with the bench's raw client); rows without one have
 * no ratio there.
 */
export function renderTable(table, contestants, baselineId, results) {
  const byContestant = results.get(table.id);
  const baseline = byContestant.get(table.baselineId ?? baselineId);
  const header = ['Contestant'];
  for (const f of table.figures)
    header.push(f.label, 'min–max', f.ratioLabel ?? table.ratioLabel ?? '× ws');
  if (table.checksDelivery) header.push('lost or misordered');
  /** The values `f` of row `c` is divided by, per round (none: no ratio). */
  const divisors = (f, c) => {
    if (f.ratio === false) return undefined;
    if (f.ratioAgainst === 'client') {
      const pair = c.clientBaselineId && byContestant.get(c.clientBaselineId);
      return pair ? (pair.values[f.key] ?? []) : undefined;
    }
    return baseline?.values[f.ratioTo ?? f.key] ?? [];
  };
  const rows = contestants
    .filter((c) => byContestant.has(c.id))
    .map((c) => {
      const entry = byContestant.get(c.id);
      const cells = [c.name];
      for (const f of table.figures) {
        const values = entry.values[f.key] ?? [];
        const s = summarize(values);
        const against = divisors(f, c);
        const ratio = against ? ratioSummary(values, against) : {};
        cells.push(
          formatNumber(s.median, f.format),
          s.n ? `${formatNumber(s.min, f.format)}–${formatNumber(s.max, f.format)}` : '—',
          formatRatio(ratio.median),
        );
      }
      if (table.checksDelivery)
        cells.push(entry.lost ? `**${entry.lost.toLocaleString('en-US')}**` : '0');
      return cells;
    });
  return markdownTable(header, rows);
}

function describeSettings(settings, kinds) {
  const r = settings.requests;
  const fanout = Object.entries(settings.fanout)
    .map(
      ([subs, { burst, paced }]) =>
        `${subs} subscribers: ${burst.n} messages in bursts of ${burst.burst}, ` +
        `${paced.n} paced one per ${paced.intervalMs} ms`,
    )
    .join('; ');
  return (
    `${settings.rounds} round${settings.rounds === 1 ? '' : 's'}; in each, every contestant runs once per scenario, ` +
    `round-robin, the order rotated by one each round.` +
    (kinds.has('requests') || kinds.has('upstream')
      ? ` Request/response slices: ${r.warmupMs} ms unmeasured then ${r.windowMs} ms measured.`
      : '') +
    (kinds.has('fanout') ? ` Fan-out per round: ${fanout}.` : '') +
    (kinds.has('memory')
      ? ` Memory: ${settings.memory.connections.toLocaleString('en-US')} connections.`
      : '') +
    (kinds.has('presence')
      ? ` Presence: ${settings.presence.members.toLocaleString('en-US')} members, waves of ` +
        `${settings.presence.wave.toLocaleString('en-US')}.`
      : '')
  );
}

const RATIO_NOTE =
  'Each figure: the median across rounds, the min–max across rounds, and × ws: the ' +
  'figure divided by raw ws echo’s figure in the same round, median across rounds ' +
  '(for CPU, latency and memory, above 1 is worse; for rates, below 1 is worse).';

function runFacts(run) {
  const m = run.machine;
  return [
    `- Command: \`${run.command}\``,
    `- Date: ${run.date}; run time ${run.durationText}`,
    `- Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB.toFixed(1)} GiB, Node ${m.node}, ${m.os}`,
    `- ${describeSettings(run.settings, run.kinds)}`,
  ];
}

/** The whole results section (markdown), for a run of every scenario. */
export function renderResults(run) {
  const facts = [...runFacts(run), `- ${RATIO_NOTE}`];
  const parts = ['## Results', facts.join('\n')];
  for (const table of run.tables) {
    parts.push(`### ${table.title}`, table.about);
    parts.push(renderTable(table, run.contestants, run.baselineId, run.results));
  }
  parts.push('### Failures');
  if (run.failures.length === 0)
    parts.push(
      'None: every call was answered correctly, and every subscriber got every message, in order.',
    );
  else parts.push(run.failures.map((f) => `- **${f}**`).join('\n'));
  return parts.join('\n\n') + '\n';
}

const partialStart = (key) => `<!-- bench:partial:${key} -->`;
const RERUN_MARK = 'From the re-run of';
/** The title suffix older versions of this file gave a replaced table: such tables are removed. */
const EARLIER = 'earlier full run';
const PARTIAL_END = '<!-- bench:partial:end -->';

/**
 * A run of some scenarios only (`--scenarios`): its facts, as a block of their own, and its
 * tables, each saying which run it comes from. `mergePartial` puts them into the results
 * section in place of the same tables of an earlier run, and keeps every other table.
 */
export function renderPartial(run) {
  const key = run.scenarioIds.join(',');
  const failures =
    run.failures.length === 0
      ? run.kinds.has('fanout')
        ? '- Failures: none: every subscriber got every message, in order.'
        : run.kinds.has('presence') && run.kinds.size === 1
          ? '- Failures: none: every join and leave was answered, and count() was right after each.'
          : '- Failures: none: every call was answered correctly.'
      : ['- Failures:', ...run.failures.map((f) => `  - **${f}**`)].join('\n');
  const ids = run.scenarioIds.map((id) => `\`${id}\``).join(', ');
  const intro = [
    partialStart(key),
    '',
    `**Re-run of ${ids} only` +
      (run.complete ? '.** ' : `, ${run.contestants.length} contestants.** `) +
      'Its tables (marked “from the re-run”) replace the earlier ones, so each scenario shows ' +
      'its latest run only; every other table is from the run above.',
    '',
    [...runFacts(run), failures].join('\n'),
    '',
    PARTIAL_END,
  ].join('\n');
  const tables = run.tables.map((table) => ({
    title: table.title,
    block: [
      `### ${table.title}`,
      `${table.about} ${RERUN_MARK} ${ids} (${run.date.slice(0, 10)}).`,
      renderTable(table, run.contestants, run.baselineId, run.results),
    ].join('\n\n'),
  }));
  return { key, intro, tables, complete: run.complete };
}

/** The results section `current` (markdown, without the markers) with a partial run merged in. */
export function mergePartial(current, partial) {
  const [head, ...blocks] = current.split(/^(?=### )/m);
  const start = partialStart(partial.key);
  let cleaned = head;
  const at = head.indexOf(start);
  if (at !== -1) {
    const end = head.indexOf(PARTIAL_END, at);
    cleaned = head.slice(0, at) + (end === -1 ? '' : head.slice(end + PARTIAL_END.length));
  }
  const nextHead = `${cleaned.trimEnd()}\n\n${partial.intro}\n\n`;
  const titleOf = (block) =>
    block.slice(4, block.indexOf('\n') === -1 ? undefined : block.indexOf('\n')).trim();
  const nextBlocks = [...blocks];
  for (const table of partial.tables) {
    const i = nextBlocks.findIndex((b) => titleOf(b) === table.title);
    const block = `${table.block}\n\n`;
    if (i !== -1) {
      // Only the latest run of each scenario: numbers from two runs are not comparable.
      nextBlocks.splice(i, 1, block);
      const earlier = nextBlocks.findIndex((b) => titleOf(b) === `${table.title}, ${EARLIER}`);
      if (earlier !== -1) nextBlocks.splice(earlier, 1);
    } else {
      const failures = nextBlocks.findIndex((b) => titleOf(b) === 'Failures');
      nextBlocks.splice(failures === -1 ? nextBlocks.length : failures, 0, block);
    }
  }
  return nextHead + nextBlocks.join('');
}

async function formatMarkdown(text, filepath) {
  try {
    const prettier = await import('prettier');
    const options = (await prettier.resolveConfig(filepath)) ?? {};
    return await prettier.format(text, { ...options, filepath, parser: 'markdown' });
  } catch {
    return text;
  }
}

/**
 * Replace the results section of `filepath` (between the markers) with `section`, or, for a
 * partial run (`renderPartial`), merge its tables into the section that is there.
 */
export async function writeResults(filepath, section) {
  let current;
  try {
    current = await readFile(filepath, 'utf8');
  } catch {
    current = `# Benchmarks\n\n${RESULTS_START}\n${RESULTS_END}\n`;
  }
  const start = current.indexOf(RESULTS_START);
  const end = current.indexOf(RESULTS_END);
  const found = start !== -1 && end > start;
  let text = section;
  if (typeof section !== 'string') {
    const inner = found ? current.slice(start + RESULTS_START.length, end).trim() : '';
    text = mergePartial(inner || '## Results\n', section);
  }
  const block = `${RESULTS_START}\n\n${text.trimEnd()}\n\n${RESULTS_END}`;
  const next = found
    ? current.slice(0, start) + block + current.slice(end + RESULTS_END.length)
    : `${current.trimEnd()}\n\n${block}\n`;
  await writeFile(filepath, await formatMarkdown(next, filepath));
}

/** A partial run as it reads on its own (the console). */
export function partialForConsole(partial) {
  return [partial.intro, ...partial.tables.map((t) => t.block)].join('\n\n') + '\n';
}

/** The section as prettier would print it (for the console). */
export function formatForConsole(section, filepath) {
  return formatMarkdown(section, filepath);
}

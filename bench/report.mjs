// Turns the per-round figures into markdown tables, and writes them into BENCHMARKS.md
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

/** One table: a row per contestant, and per figure its median, min–max and ratio to the baseline. */
export function renderTable(table, contestants, baselineId, results) {
  const byContestant = results.get(table.id);
  const baseline = byContestant.get(baselineId);
  const header = ['Contestant'];
  for (const f of table.figures) header.push(f.label, 'min–max', '× ws');
  if (table.checksDelivery) header.push('lost or misordered');
  const rows = contestants
    .filter((c) => byContestant.has(c.id))
    .map((c) => {
      const entry = byContestant.get(c.id);
      const cells = [c.name];
      for (const f of table.figures) {
        const values = entry.values[f.key] ?? [];
        const s = summarize(values);
        const ratio = ratioSummary(values, baseline.values[f.key] ?? []);
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

function describeSettings(settings) {
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
    `round-robin, the order rotated by one each round. ` +
    `Request/response slices: ${r.warmupMs} ms unmeasured then ${r.windowMs} ms measured. ` +
    `Fan-out per round: ${fanout}. Memory: ${settings.memory.connections.toLocaleString('en-US')} connections.`
  );
}

/** The whole results section (markdown). */
export function renderResults(run) {
  const m = run.machine;
  const facts = [
    `- Command: \`${run.command}\``,
    `- Date: ${run.date}; run time ${run.durationText}`,
    `- Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB.toFixed(1)} GiB, Node ${m.node}, ${m.os}`,
    `- ${describeSettings(run.settings)}`,
    '- Each figure: the median across rounds, the min–max across rounds, and × ws: the ' +
      'figure divided by raw ws echo’s figure in the same round, median across rounds ' +
      '(for CPU, latency and memory, above 1 is worse; for rates, below 1 is worse).',
  ];
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

async function formatMarkdown(text, filepath) {
  try {
    const prettier = await import('prettier');
    const options = (await prettier.resolveConfig(filepath)) ?? {};
    return await prettier.format(text, { ...options, filepath, parser: 'markdown' });
  } catch {
    return text;
  }
}

/** Replace the results section of `filepath` (between the markers) with `section`. */
export async function writeResults(filepath, section) {
  let current;
  try {
    current = await readFile(filepath, 'utf8');
  } catch {
    current = `# Benchmarks\n\n${RESULTS_START}\n${RESULTS_END}\n`;
  }
  const start = current.indexOf(RESULTS_START);
  const end = current.indexOf(RESULTS_END);
  const block = `${RESULTS_START}\n\n${section}\n${RESULTS_END}`;
  const next =
    start !== -1 && end > start
      ? current.slice(0, start) + block + current.slice(end + RESULTS_END.length)
      : `${current.trimEnd()}\n\n${block}\n`;
  await writeFile(filepath, await formatMarkdown(next, filepath));
}

/** The section as prettier would print it (for the console). */
export function formatForConsole(section, filepath) {
  return formatMarkdown(section, filepath);
}

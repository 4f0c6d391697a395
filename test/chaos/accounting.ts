/**
 * The chaos suite's accounting: what each subscriber was owed (every publish the broker
 * accepted, by the seq its publish returned) against what it got (its subscribeWithMeta
 * events: messages `{data, seq, missed}` and gap signals `{gap}`).
 *
 * Each accepted message ends, per subscription, in exactly one class:
 *   delivered  - received once, in order;
 *   gap        - inside a counted gap signal (`gap: n`, which covers the n seqs after the last
 *                one accounted);
 *   missed     - inside the `missed` count of the next message (which covers the seqs just
 *                before it);
 *   unknown    - inside an unknown gap (`gap: null`; with a new epoch the numbering restarts,
 *                so it covers the rest of the old numbering too);
 *   reordered  - received after a later seq (or after a signal that said it was lost);
 *   passed     - not received, and published `except` this subscriber (`excepted`): not owed,
 *                so never told as lost either; a gap or `missed` counts only the other seqs;
 *   lost       - none of these: SILENTLY LOST.
 * Copies received again are counted apart as duplicates. Publishes that were rejected are owed
 * to nobody; if the broker stored one anyway (its reply was lost), receiving it is fine and
 * skipping it needs no signal, but its seq still counts in the numbering that signals cover.
 *
 * Numberings: the broker may lose a topic and number it from 1 again (a Redis restarted without
 * persistence). Each publish carries the generation (`gen`) of the numbering it was made in,
 * which the engine knows since it restarts the broker itself.
 *
 * Windows: a subscription that was there for only part of the run (the engine's raw-protocol
 * subscribers, which never reconnect) is owed only the accepted messages inside its window:
 * after a point `(gen, seq)` (its position) and up to another (inclusive). The rest is owed
 * to it by nobody: not classified, not counted as expected, and received copies are ignored.
 */

/** One publish the engine attempted. Its payload is `{ t: topic, i }`: that is how it is recognized. */
export interface PublishRecord {
  topic: string;
  /** Unique per topic: the payload's `i`. */
  i: number;
  /** The broker numbering it belongs to: bumped each time the broker loses its data. */
  gen: number;
  /** The fault scenario running when it was published (the row it is counted in). */
  phase: string;
  startedAt: number;
  /** The seq the publish returned: set when (and only when) the broker accepted it. */
  seq?: number;
  /** Set once settled; `error` says why it was not accepted. */
  settled: boolean;
  error?: string;
}

/** One event of a subscription, with the time it arrived. */
export interface ReceivedEvent {
  data: unknown;
  seq?: number;
  missed?: number;
  gap?: number | null;
  at: number;
}

/** A point in a topic's numberings: seq `seq` of numbering `gen`. */
export interface SeqPoint {
  gen: number;
  seq: number;
}

/** The part of a topic's accepted messages a subscription is owed: after `after`, up to `upTo` (inclusive). */
export interface AccountWindow {
  after: SeqPoint;
  /** Undefined: to the end of the run. */
  upTo?: SeqPoint;
}

/** Whether `record` (accepted) falls inside `window` (no window: the whole run). */
export function inWindow(record: PublishRecord, window: AccountWindow | undefined): boolean {
  if (record.seq === undefined) return false;
  if (window === undefined) return true;
  const { after, upTo } = window;
  if (record.gen < after.gen || (record.gen === after.gen && record.seq <= after.seq)) return false;
  return (
    upTo === undefined ||
    record.gen < upTo.gen ||
    (record.gen === upTo.gen && record.seq <= upTo.seq)
  );
}

export type Outcome = 'delivered' | 'gap' | 'missed' | 'unknown' | 'reordered' | 'passed' | 'lost';
export const OUTCOMES: readonly Outcome[] = [
  'delivered',
  'gap',
  'missed',
  'unknown',
  'reordered',
  'passed',
  'lost',
];

/** Every publish of a run, by topic, and the accepted ones by numbering and seq. */
export class PublishLog {
  private readonly byTopic = new Map<string, Map<number, PublishRecord>>();
  private readonly acceptedBySeq = new Map<string, Map<number, PublishRecord>>();
  /** Two accepted publishes that got the same seq in one numbering. */
  readonly conflicts: string[] = [];

  constructor(readonly topics: readonly string[]) {
    for (const topic of topics) this.byTopic.set(topic, new Map());
  }

  /** A new publish; its payload is `{ t: topic, i }`. */
  start(topic: string, gen: number, phase: string, at = Date.now()): PublishRecord {
    const records = this.byTopic.get(topic);
    if (!records) throw new Error(`unknown topic ${topic}`);
    const record: PublishRecord = {
      topic,
      i: records.size + 1,
      gen,
      phase,
      startedAt: at,
      settled: false,
    };
    records.set(record.i, record);
    return record;
  }

  accept(record: PublishRecord, seq: number): void {
    record.seq = seq;
    record.settled = true;
    const key = `${record.topic}#${record.gen}`;
    let bySeq = this.acceptedBySeq.get(key);
    if (!bySeq) this.acceptedBySeq.set(key, (bySeq = new Map()));
    const other = bySeq.get(seq);
    if (other) {
      this.conflicts.push(
        `${record.topic}: publishes #${other.i} and #${record.i} both got seq ${seq} (numbering ${record.gen})`,
      );
    }
    bySeq.set(seq, record);
  }

  reject(record: PublishRecord, error: string): void {
    record.settled = true;
    record.error = error;
  }

  /** The record a payload stands for, if it is one of ours. */
  recordOf(topic: string, data: unknown): PublishRecord | undefined {
    if (typeof data !== 'object' || data === null) return undefined;
    const { t, i } = data as { t?: unknown; i?: unknown };
    if (t !== topic || typeof i !== 'number') return undefined;
    return this.byTopic.get(topic)?.get(i);
  }

  /** The accepted publish with `seq` in numbering `gen` of `topic`. */
  accepted(topic: string, gen: number, seq: number): PublishRecord | undefined {
    return this.acceptedBySeq.get(`${topic}#${gen}`)?.get(seq);
  }

  /** Every accepted publish of `topic`. */
  acceptedOf(topic: string): PublishRecord[] {
    return [...(this.byTopic.get(topic)?.values() ?? [])].filter((r) => r.seq !== undefined);
  }

  /** Every publish of `topic`, accepted or not. */
  all(topic: string): PublishRecord[] {
    return [...(this.byTopic.get(topic)?.values() ?? [])];
  }

  /** The highest accepted seq of numbering `gen` (0 when none). */
  lastSeq(topic: string, gen: number): number {
    let last = 0;
    for (const seq of this.acceptedBySeq.get(`${topic}#${gen}`)?.keys() ?? []) {
      if (seq > last) last = seq;
    }
    return last;
  }

  /** The numberings `topic` has accepted publishes in, ascending. */
  gens(topic: string): number[] {
    const gens = new Set(this.acceptedOf(topic).map((r) => r.gen));
    return [...gens].sort((a, b) => a - b);
  }
}

/** What one subscription (one client, one topic) got for what it was owed. */
export interface SubscriptionAccount {
  label: string;
  topic: string;
  /** The messages it is owed; undefined: every accepted publish of the topic. */
  window?: AccountWindow;
  /** Every accepted publish it is owed, classified. */
  outcomes: Map<PublishRecord, Outcome>;
  /** One entry per extra copy received. */
  duplicates: PublishRecord[];
  /** Messages received that the broker stored although their publish was rejected. */
  unacknowledged: number;
  /** Gap signals received: counted and unknown. */
  countedGaps: number;
  unknownGaps: number;
  /** Violations that are not about one message: payloads not ours, seqs that do not match, wrong counts. */
  problems: string[];
}

/**
 * Walk one subscription's events. Each message's seq must be past the last one accounted (in
 * its numbering); the seqs skipped must be covered by the gap signals since and its `missed`.
 * With a `window`, the walk starts at its `after` point, ignores messages before it and stops
 * at the first message past `upTo`.
 * `excepted`: the publishes made `except` this subscriber (one of its sessions). Not received,
 * they are passed by: never counted in a gap signal or `missed`, which must then cover exactly
 * the other seqs skipped. Received, they count as delivered (a resume on a later session
 * replays them, as history keeps them for everyone); that the excepted session itself never
 * got one is for the caller to check, on what each connection received.
 */
export function accountSubscription(
  label: string,
  topic: string,
  events: readonly ReceivedEvent[],
  log: PublishLog,
  window?: AccountWindow,
  excepted?: (record: PublishRecord) => boolean,
): SubscriptionAccount {
  const account: SubscriptionAccount = {
    label,
    topic,
    ...(window === undefined ? {} : { window }),
    outcomes: new Map(),
    duplicates: [],
    unacknowledged: 0,
    countedGaps: 0,
    unknownGaps: 0,
    problems: [],
  };
  const gens = log.gens(topic).filter((g) => window === undefined || g >= window.after.gen);
  let gen = window?.after.gen ?? gens[0] ?? 0;
  /** The last seq accounted in numbering `gen`. */
  let prev = window?.after.seq ?? 0;
  /** Seqs announced lost by counted gap signals since the last message. */
  let pendingGap = 0;
  /** An unknown gap was announced since the last message. */
  let unknown = false;
  const received = new Set<PublishRecord>();
  const isExcepted = (record: PublishRecord | undefined): boolean =>
    record !== undefined && excepted !== undefined && excepted(record);
  /**
   * Classify an accepted publish it is owed (once; the others are owed to nobody). One published
   * `except` it and not received is passed by, whatever covers its seq.
   */
  const classify = (record: PublishRecord | undefined, outcome: Outcome): void => {
    if (record !== undefined && inWindow(record, window) && !account.outcomes.has(record)) {
      const passed = outcome !== 'delivered' && outcome !== 'reordered' && isExcepted(record);
      account.outcomes.set(record, passed ? 'passed' : outcome);
    }
  };
  /** Classify the seqs after `from` up to `to` (inclusive) of numbering `g` as `outcome`. */
  const classifyRange = (g: number, from: number, to: number, outcome: Outcome): void => {
    for (let seq = from + 1; seq <= to; seq++) classify(log.accepted(topic, g, seq), outcome);
  };
  /**
   * The seqs between `prev` and `seq` (exclusive), in numbering `gen`: covered or lost. Those
   * published `except` it are passed by; the counted signals cover the others, in order: the
   * gap signals the first ones, `missed` the last ones.
   */
  const skip = (seq: number, missed: number): void => {
    if (unknown) {
      classifyRange(gen, prev, seq - 1, 'unknown');
      return;
    }
    const owed: number[] = [];
    for (let s = prev + 1; s < seq; s++) {
      if (!isExcepted(log.accepted(topic, gen, s))) owed.push(s);
    }
    const passed = seq - prev - 1 - owed.length;
    if (pendingGap + missed > owed.length) {
      account.problems.push(
        `${label}/${topic}: told ${pendingGap} lost by gap signals and ${missed} missed before seq ${seq}, but only ${owed.length} seqs were skipped` +
          (passed > 0 ? ` besides ${passed} published except it` : ''),
      );
    }
    const gapEnd = Math.min(owed.length, pendingGap);
    const missedStart = Math.max(gapEnd, owed.length - missed);
    owed.forEach((s, k) => {
      const outcome = k < gapEnd ? 'gap' : k >= missedStart ? 'missed' : 'lost';
      classify(log.accepted(topic, gen, s), outcome);
    });
    for (let s = prev + 1; s < seq; s++) {
      const record = log.accepted(topic, gen, s);
      if (isExcepted(record)) classify(record, 'passed');
    }
  };

  for (const event of events) {
    if (event.gap !== undefined) {
      if (event.gap === null) {
        unknown = true;
        account.unknownGaps++;
      } else {
        pendingGap += event.gap;
        account.countedGaps++;
      }
      continue;
    }
    const record = log.recordOf(topic, event.data);
    if (!record) {
      account.problems.push(
        `${label}/${topic}: a payload that was never published: ${JSON.stringify(event.data)}`,
      );
      continue;
    }
    const seq = event.seq;
    if (typeof seq !== 'number') {
      account.problems.push(`${label}/${topic}: message #${record.i} without a seq`);
      continue;
    }
    if (record.seq !== undefined && record.seq !== seq) {
      account.problems.push(
        `${label}/${topic}: message #${record.i} came with seq ${seq}, its publish returned ${record.seq}`,
      );
    }
    if (window !== undefined && record.seq !== undefined && !inWindow(record, window)) {
      const { upTo } = window;
      const past =
        upTo !== undefined &&
        (record.gen > upTo.gen || (record.gen === upTo.gen && seq > upTo.seq));
      // Past the window: so is everything after it. Before it: owed to nobody.
      if (past) break;
      continue;
    }
    if (record.seq === undefined) account.unacknowledged++;
    if (received.has(record)) {
      account.duplicates.push(record);
      continue;
    }
    received.add(record);
    const g = record.gen;
    if (g < gen || (g === gen && seq <= prev)) {
      // After a later one (or after a signal that accounted for it).
      if (record.seq !== undefined) account.outcomes.set(record, 'reordered');
      else account.problems.push(`${label}/${topic}: unacknowledged seq ${seq} out of order`);
      continue;
    }
    if (g > gen) {
      // A new numbering: the rest of the old ones is covered only by an unknown gap.
      for (const old of gens.filter((x) => x >= gen && x < g)) {
        classifyRange(
          old,
          old === gen ? prev : 0,
          log.lastSeq(topic, old),
          unknown ? 'unknown' : 'lost',
        );
      }
      if (!unknown) {
        account.problems.push(
          `${label}/${topic}: a new numbering (seq ${seq}) began without an unknown gap signal`,
        );
      }
      gen = g;
      prev = 0;
    }
    skip(seq, event.missed ?? 0);
    classify(record, 'delivered');
    prev = seq;
    pendingGap = 0;
    unknown = false;
  }

  // What was accepted after the last message received: covered by signals since, or lost.
  for (const g of gens.filter((x) => x >= gen)) {
    const from = g === gen ? prev : 0;
    const last = log.lastSeq(topic, g);
    if (unknown) classifyRange(g, from, last, 'unknown');
    else {
      // The gap signals cover the first seqs it is owed; those published except it are passed.
      let told = g === gen ? pendingGap : 0;
      for (let seq = from + 1; seq <= last; seq++) {
        const record = log.accepted(topic, g, seq);
        if (isExcepted(record)) classify(record, 'passed');
        else if (record !== undefined) classify(record, told-- > 0 ? 'gap' : 'lost');
        else told--;
      }
    }
  }
  // Anything left (an older numbering the walk jumped over) was never accounted for.
  for (const record of log.acceptedOf(topic)) classify(record, 'lost');
  return account;
}

/** Whether `account` is owed `record` (an accepted publish of its topic). */
export function owes(account: SubscriptionAccount, record: PublishRecord): boolean {
  return record.topic === account.topic && inWindow(record, account.window);
}

/** One row of the table: counts over the messages published during one scenario. */
export interface Row {
  scenario: string;
  broker: string;
  /** Accepted publishes. */
  published: number;
  /** Accepted publishes times the subscriptions of their topic that are owed them. */
  expected: number;
  delivered: number;
  gap: number;
  missed: number;
  unknown: number;
  lost: number;
  duplicates: number;
  reordered: number;
  /** Not received, published `except` the subscriber (owed to it by nobody). */
  passed: number;
  /** Rejected publishes (owed to nobody). */
  rejected: number;
  /** Resume times (ms) after the fault ended, one per affected subscription. */
  resumeMs: number[];
  /** Times the fault was injected. */
  faults: number;
}

export function emptyRow(scenario: string, broker: string): Row {
  return {
    scenario,
    broker,
    published: 0,
    expected: 0,
    delivered: 0,
    gap: 0,
    missed: 0,
    unknown: 0,
    lost: 0,
    duplicates: 0,
    reordered: 0,
    passed: 0,
    rejected: 0,
    resumeMs: [],
    faults: 0,
  };
}

/**
 * Sum subscription accounts into rows by the scenario each message was published in, over
 * `topics` (default: every topic of the log).
 */
export function rowsByScenario(
  broker: string,
  scenarios: readonly string[],
  log: PublishLog,
  accounts: readonly SubscriptionAccount[],
  topics: readonly string[] = log.topics,
): Map<string, Row> {
  const rows = new Map<string, Row>();
  const row = (scenario: string): Row => {
    let found = rows.get(scenario);
    if (!found) rows.set(scenario, (found = emptyRow(scenario, broker)));
    return found;
  };
  for (const scenario of scenarios) row(scenario);
  for (const topic of topics) {
    const whole = accounts.filter((a) => a.topic === topic && a.window === undefined).length;
    const windowed = accounts.filter((a) => a.topic === topic && a.window !== undefined);
    for (const record of log.all(topic)) {
      const r = row(record.phase);
      if (record.seq !== undefined) {
        r.published++;
        r.expected += whole + windowed.filter((a) => owes(a, record)).length;
      } else if (record.settled) r.rejected++;
    }
  }
  for (const account of accounts) {
    for (const [record, outcome] of account.outcomes) row(record.phase)[outcome]++;
    for (const record of account.duplicates) row(record.phase).duplicates++;
  }
  return rows;
}

/** The rows summed into one. */
export function totalRow(scenario: string, broker: string, rows: Iterable<Row>): Row {
  const total = emptyRow(scenario, broker);
  for (const r of rows) {
    for (const key of [
      'published',
      'expected',
      'delivered',
      'gap',
      'missed',
      'unknown',
      'lost',
      'duplicates',
      'reordered',
      'passed',
      'rejected',
      'faults',
    ] as const) {
      total[key] += r[key];
    }
    total.resumeMs.push(...r.resumeMs);
  }
  return total;
}

/** The accepted messages of one subscription in `outcome`, as seq ranges (`12-40,57`), for reports. */
export function seqRanges(account: SubscriptionAccount, outcome: Outcome): string {
  const seqs = [...account.outcomes]
    .filter(([, o]) => o === outcome)
    .map(([record]) => ({ gen: record.gen, seq: record.seq! }))
    .sort((a, b) => a.gen - b.gen || a.seq - b.seq);
  const parts: string[] = [];
  for (let k = 0; k < seqs.length;) {
    let end = k;
    while (
      end + 1 < seqs.length &&
      seqs[end + 1]!.gen === seqs[k]!.gen &&
      seqs[end + 1]!.seq === seqs[end]!.seq + 1
    )
      end++;
    const gen = seqs[k]!.gen > 0 ? `g${seqs[k]!.gen}:` : '';
    parts.push(end === k ? `${gen}${seqs[k]!.seq}` : `${gen}${seqs[k]!.seq}-${seqs[end]!.seq}`);
    k = end + 1;
  }
  return parts.join(',');
}

export function median(values: readonly number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : Math.round((sorted[mid - 1]! + sorted[mid]!) / 2);
}

const COLUMNS: readonly { head: string; cell: (r: Row, cap: number) => string }[] = [
  { head: 'scenario', cell: (r) => r.scenario },
  { head: 'broker', cell: (r) => r.broker },
  { head: 'faults', cell: (r) => String(r.faults) },
  { head: 'published', cell: (r) => String(r.published) },
  { head: 'expected', cell: (r) => String(r.expected) },
  { head: 'delivered', cell: (r) => String(r.delivered) },
  { head: 'in gaps', cell: (r) => String(r.gap) },
  { head: 'in missed', cell: (r) => String(r.missed) },
  { head: 'in unknown gaps', cell: (r) => String(r.unknown) },
  { head: 'SILENTLY LOST', cell: (r) => String(r.lost) },
  { head: 'duplicates', cell: (r) => String(r.duplicates) },
  { head: 'reordered', cell: (r) => String(r.reordered) },
  { head: 'passed (except)', cell: (r) => String(r.passed) },
  {
    head: 'resume med/max ms',
    cell: (r) =>
      r.resumeMs.length === 0 ? '-' : `${median(r.resumeMs)}/${Math.max(...r.resumeMs)}`,
  },
  { head: 'backoff cap ms', cell: (_r, cap) => String(cap) },
];

/** The accounting table, one line per row, columns aligned. */
export function formatTable(rows: readonly Row[], backoffCapMs: number): string {
  const cells = [
    COLUMNS.map((c) => c.head),
    ...rows.map((r) => COLUMNS.map((c) => c.cell(r, backoffCapMs))),
  ];
  const widths = COLUMNS.map((_, k) => Math.max(...cells.map((line) => line[k]!.length)));
  const line = (values: string[]): string =>
    values.map((v, k) => (k < 2 ? v.padEnd(widths[k]!) : v.padStart(widths[k]!))).join(' | ');
  const rule = widths.map((w) => '-'.repeat(w)).join('-+-');
  return [line(cells[0]!), rule, ...cells.slice(1).map(line)].join('\n');
}

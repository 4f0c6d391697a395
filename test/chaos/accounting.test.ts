/**
 * The chaos suite's accounting (test/chaos/accounting.ts) on made-up event sequences: each way a
 * message can end for a subscriber is classified as such, and nothing is classified twice.
 */
import { describe, expect, it } from 'vitest';
import {
  PublishLog,
  accountSubscription,
  formatTable,
  inWindow,
  rowsByScenario,
  seqRanges,
  totalRow,
} from './accounting.js';
import type { Outcome, PublishRecord, ReceivedEvent } from './accounting.js';

const T = 'topic';

/** A log with `count` accepted publishes in numbering `gen`, seqs 1..count, all in `phase`. */
function publish(log: PublishLog, count: number, gen = 0, phase = 'steady'): PublishRecord[] {
  return Array.from({ length: count }, (_, k) => {
    const record = log.start(T, gen, phase);
    log.accept(record, k + 1);
    return record;
  });
}

const message = (record: PublishRecord, extra: Partial<ReceivedEvent> = {}): ReceivedEvent => ({
  data: { t: T, i: record.i },
  seq: record.seq!,
  at: 0,
  ...extra,
});
const gap = (count: number | null): ReceivedEvent => ({ data: undefined, gap: count, at: 0 });

/** seq -> outcome, for numbering `gen`. */
function outcomes(log: PublishLog, events: ReceivedEvent[], gen = 0): Record<number, Outcome> {
  const account = accountSubscription('S', T, events, log);
  const out: Record<number, Outcome> = {};
  for (const [record, outcome] of account.outcomes)
    if (record.gen === gen) out[record.seq!] = outcome;
  return out;
}

describe('chaos accounting', () => {
  it('everything received once in order: all delivered', () => {
    const log = new PublishLog([T]);
    const records = publish(log, 4);
    const account = accountSubscription(
      'S',
      T,
      records.map((r) => message(r)),
      log,
    );
    expect([...account.outcomes.values()]).toEqual([
      'delivered',
      'delivered',
      'delivered',
      'delivered',
    ]);
    expect(account.duplicates).toEqual([]);
    expect(account.problems).toEqual([]);
  });

  it('a counted gap covers the seqs right after the last one; missed covers those just before its message', () => {
    const log = new PublishLog([T]);
    const [r1, , , , r5, , , r8] = publish(log, 8);
    expect(
      outcomes(log, [
        message(r1!),
        gap(2),
        message(r5!, { missed: 1 }),
        message(r8!, { missed: 2 }),
      ]),
    ).toEqual({
      1: 'delivered',
      2: 'gap',
      3: 'gap',
      4: 'missed',
      5: 'delivered',
      6: 'missed',
      7: 'missed',
      8: 'delivered',
    });
  });

  it('seqs skipped without a signal are silently lost; so is what never arrived at the end', () => {
    const log = new PublishLog([T]);
    const [r1, , , r4] = publish(log, 6);
    const account = accountSubscription('S', T, [message(r1!), gap(1), message(r4!)], log);
    expect(outcomes(log, [message(r1!), gap(1), message(r4!)])).toEqual({
      1: 'delivered',
      2: 'gap',
      3: 'lost',
      4: 'delivered',
      5: 'lost',
      6: 'lost',
    });
    expect(seqRanges(account, 'lost')).toBe('3,5-6');
    // A gap signal after the last message covers the tail, as far as it counts.
    expect(outcomes(log, [message(r1!), gap(1), message(r4!), gap(1)])[5]).toBe('gap');
  });

  it('a copy is a duplicate; a seq after a later one is reordered (not lost)', () => {
    const log = new PublishLog([T]);
    const [r1, r2, r3] = publish(log, 3);
    const account = accountSubscription(
      'S',
      T,
      [message(r1!), message(r3!), message(r2!), message(r3!)],
      log,
    );
    expect(account.duplicates.map((r) => r.seq)).toEqual([3]);
    expect(outcomes(log, [message(r1!), message(r3!), message(r2!)])).toEqual({
      1: 'delivered',
      2: 'reordered',
      3: 'delivered',
    });
  });

  it('an unknown gap covers the rest of the old numbering and the new one up to the next message', () => {
    const log = new PublishLog([T]);
    const [a1, a2] = publish(log, 4, 0);
    const [, b2, b3] = publish(log, 3, 1);
    const events = [message(a1!), message(a2!), gap(null), message(b2!), message(b3!)];
    expect(outcomes(log, events, 0)).toEqual({
      1: 'delivered',
      2: 'delivered',
      3: 'unknown',
      4: 'unknown',
    });
    expect(outcomes(log, events, 1)).toEqual({ 1: 'unknown', 2: 'delivered', 3: 'delivered' });
    expect(accountSubscription('S', T, events, log).problems).toEqual([]);
    // Without the signal the old numbering's rest is lost, and that is a problem of its own.
    const silent = accountSubscription('S', T, [message(a1!), message(b2!), message(b3!)], log);
    expect(seqRanges(silent, 'lost')).toBe('2-4,g1:1');
    expect(silent.problems).toHaveLength(1);
  });

  it('a rejected publish is owed to nobody, yet its seq counts when signals are checked', () => {
    const log = new PublishLog([T]);
    const r1 = log.start(T, 0, 'steady');
    log.accept(r1, 1);
    const lostReply = log.start(T, 0, 'steady'); // stored as seq 2, its reply lost
    log.reject(lostReply, 'Connection closed');
    const r3 = log.start(T, 0, 'steady');
    log.accept(r3, 3);
    const received = accountSubscription(
      'S',
      T,
      [message(r1), { ...message(r3), seq: 2, data: { t: T, i: 2 } }, message(r3)],
      log,
    );
    expect(received.unacknowledged).toBe(1);
    expect(received.problems).toEqual([]);
    const skipped = accountSubscription('S', T, [message(r1), message(r3)], log);
    expect([...skipped.outcomes.values()]).toEqual(['delivered', 'delivered']);
    const overcounted = accountSubscription('S', T, [message(r1), gap(2), message(r3)], log);
    expect(overcounted.problems).toHaveLength(1);
  });

  it('a payload that was never published, or one with another seq than its publish returned, is a problem', () => {
    const log = new PublishLog([T]);
    const [r1] = publish(log, 2);
    const account = accountSubscription(
      'S',
      T,
      [{ data: { t: T, i: 99 }, seq: 1, at: 0 }, message(r1!, { seq: 2 })],
      log,
    );
    expect(account.problems).toHaveLength(2);
  });

  it('a window: only the seqs after its start and up to its end are owed; messages outside it are ignored', () => {
    const log = new PublishLog([T]);
    const [r1, r2, r3, r4, r5, r6, r7] = publish(log, 7);
    const window = { after: { gen: 0, seq: 2 }, upTo: { gen: 0, seq: 5 } };
    // Seq 2 (before the window) and 6, 7 (after it) received: ignored; 4 skipped silently: lost.
    const account = accountSubscription(
      'W',
      T,
      [message(r2!), message(r3!), message(r5!), message(r6!), message(r7!)],
      log,
      window,
    );
    expect(Object.fromEntries([...account.outcomes].map(([r, o]) => [r.seq, o]))).toEqual({
      3: 'delivered',
      4: 'lost',
      5: 'delivered',
    });
    expect(account.problems).toEqual([]);
    // What its end owes it and it never got is lost; a gap signal covers it as usual.
    const short = accountSubscription('W', T, [message(r3!)], log, window);
    expect(seqRanges(short, 'lost')).toBe('4-5');
    const told = accountSubscription('W', T, [message(r3!), gap(2)], log, window);
    expect(seqRanges(told, 'gap')).toBe('4-5');
    // Without an end it runs to the last accepted seq; a window over numberings starts in its own.
    const open = accountSubscription('W', T, [message(r3!), message(r4!)], log, {
      after: { gen: 0, seq: 2 },
    });
    expect(seqRanges(open, 'lost')).toBe('5-7');
    const [b1, b2] = publish(log, 2, 1);
    const later = accountSubscription('W', T, [message(r7!), message(b2!)], log, {
      after: { gen: 1, seq: 0 },
    });
    expect(seqRanges(later, 'delivered')).toBe('g1:2');
    expect(seqRanges(later, 'lost')).toBe('g1:1');
    // Rows count a windowed subscription as expected only for what it is owed.
    const rows = rowsByScenario('redis', ['steady'], log, [account, later]);
    expect(rows.get('steady')).toMatchObject({ published: 9, expected: 5, delivered: 3, lost: 2 });
    expect(inWindow(r1!, window) || inWindow(b1!, window)).toBe(false);
  });

  it('rows count each accepted message per subscription in the scenario it was published in', () => {
    const log = new PublishLog([T]);
    const [r1] = publish(log, 1, 0, 'steady');
    const later = log.start(T, 0, 'partition');
    log.accept(later, 2);
    const rejected = log.start(T, 0, 'partition');
    log.reject(rejected, 'Broker unavailable');
    const accounts = [
      accountSubscription('A', T, [message(r1!), message(later)], log),
      accountSubscription('B', T, [message(r1!)], log),
    ];
    const rows = rowsByScenario('redis', ['steady', 'partition'], log, accounts);
    expect(rows.get('steady')).toMatchObject({ published: 1, expected: 2, delivered: 2, lost: 0 });
    expect(rows.get('partition')).toMatchObject({
      published: 1,
      expected: 2,
      delivered: 1,
      lost: 1,
      rejected: 1,
    });
    const total = totalRow('all', 'redis', rows.values());
    expect(total).toMatchObject({ published: 2, expected: 4, delivered: 3, lost: 1 });
    const table = formatTable([...rows.values(), total], 1_000).split('\n');
    expect(table).toHaveLength(5);
    expect(table[0]).toContain('SILENTLY LOST');
  });
  it('a message published except the subscriber is passed by: never lost, never inside a gap or missed count', () => {
    const log = new PublishLog([T]);
    const [r1, r2, r3, r4, r5, r6] = publish(log, 6);
    const except = new Set([r2!, r4!]);
    const excepted = (record: PublishRecord): boolean => except.has(record);
    const account = (events: ReceivedEvent[]) =>
      accountSubscription('S', T, events, log, undefined, excepted);
    const outcomesOf = (events: ReceivedEvent[]): Record<number, Outcome> => {
      const out: Record<number, Outcome> = {};
      for (const [record, outcome] of account(events).outcomes) out[record.seq!] = outcome;
      return out;
    };
    // Passed by without a word: nothing lost, no problem.
    const quiet = [message(r1!), message(r3!), message(r5!), message(r6!)];
    expect(outcomesOf(quiet)).toEqual({
      1: 'delivered',
      2: 'passed',
      3: 'delivered',
      4: 'passed',
      5: 'delivered',
      6: 'delivered',
    });
    expect(account(quiet).problems).toEqual([]);
    // A gap of 1 beside a passed seq covers the other skipped seq, exactly.
    const counted = [message(r1!), gap(1), message(r4!), message(r6!, { missed: 1 })];
    expect(outcomesOf(counted)).toMatchObject({ 2: 'passed', 3: 'gap', 5: 'missed' });
    expect(account(counted).problems).toEqual([]);
    // Told as lost: a gap or a `missed` counting a passed seq is a problem.
    expect(account([message(r1!), gap(1), message(r3!)]).problems).toEqual([
      'S/topic: told 1 lost by gap signals and 0 missed before seq 3, but only 0 seqs were skipped besides 1 published except it',
    ]);
    expect(account([message(r3!), message(r5!, { missed: 1 })]).problems).toHaveLength(1);
    // Received anyway (a resume on another session replays it): delivered.
    expect(outcomesOf([message(r1!), message(r2!), message(r3!)])[2]).toBe('delivered');
    // After the last message the gap counts only what it is owed: 5 and 6 past the passed 4.
    expect(outcomesOf([message(r1!), message(r3!), gap(2)])).toMatchObject({
      4: 'passed',
      5: 'gap',
      6: 'gap',
    });
  });
});

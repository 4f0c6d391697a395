/**
 * Small helpers the fault-case tests share to feed the chaos accounting (accounting.ts): what
 * a raw-protocol subscriber (RawRpc) received, as accounted events, and an account's violations
 * as readable lines.
 */
import type { Subscriber } from '../support/cluster.js';
import type { SubscriptionParams } from '../support/raw-rpc.js';
import { accountSubscription, seqRanges } from './accounting.js';
import type { PublishLog, ReceivedEvent, SubscriptionAccount } from './accounting.js';

/** A raw subscriber's messages and gap signals, in order (positions and epoch notices left out). */
export function receivedEvents(notifications: readonly SubscriptionParams[]): ReceivedEvent[] {
  const events: ReceivedEvent[] = [];
  for (const n of notifications) {
    if ('result' in n) {
      const event: ReceivedEvent = { data: n.result, at: 0 };
      if (n.seq !== undefined) event.seq = n.seq;
      if (n.missed !== undefined) event.missed = n.missed;
      events.push(event);
    } else if ('gap' in n) events.push({ data: undefined, gap: n.gap ?? null, at: 0 });
  }
  return events;
}

/** A client Subscriber's account (its events, arrival times aside). */
export function subscriberAccount(
  subscriber: Subscriber,
  topic: string,
  log: PublishLog,
): SubscriptionAccount {
  const events = subscriber.events.map((e) => ({ ...e, at: 0 }));
  return accountSubscription(subscriber.label, topic, events, log);
}

/**
 * Publishes to one topic through `via`, one after another, each recorded in `log` under the
 * numbering it belongs to: a seq not past the one before starts the next (`gen`), the broker
 * having numbered the topic anew.
 */
export class NumberedPublishes {
  gen = 0;

  constructor(
    private readonly log: PublishLog,
    private readonly topic: string,
    private readonly phase: string,
    public via: { publish(topic: string, data: unknown): Promise<number> },
  ) {}

  /** Publish `count` messages; the last seq of the numbering they ended in. */
  async publish(count: number): Promise<number> {
    const { log, topic } = this;
    for (let k = 0; k < count; k++) {
      const record = log.start(topic, this.gen, this.phase);
      const seq = await this.via.publish(topic, { t: topic, i: record.i });
      if (seq <= log.lastSeq(topic, this.gen)) record.gen = ++this.gen;
      log.accept(record, seq);
    }
    return this.lastSeq;
  }

  /** The last seq published in the current numbering. */
  get lastSeq(): number {
    return this.log.lastSeq(this.topic, this.gen);
  }

  /** Whether `events` hold the message `seq` of numbering `gen` (the current one). */
  has(events: readonly { seq?: number; data: unknown }[], seq: number, gen = this.gen): boolean {
    return events.some((e) => e.seq === seq && this.log.recordOf(this.topic, e.data)?.gen === gen);
  }
}

/** What went wrong for one subscription, readably; [] when nothing did. */
export function violations(account: SubscriptionAccount): string[] {
  const out = [...account.problems];
  for (const outcome of ['lost', 'reordered'] as const) {
    const seqs = seqRanges(account, outcome);
    if (seqs)
      out.push(`${account.label}: ${outcome === 'lost' ? 'SILENTLY LOST' : outcome} ${seqs}`);
  }
  if (account.duplicates.length > 0) {
    const seqs = account.duplicates.map((r) => r.seq ?? `#${r.i}`).join(',');
    out.push(`${account.label}: duplicates ${seqs}`);
  }
  return out;
}

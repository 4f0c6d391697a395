/**
 * Small helpers the fault-case tests share to feed the chaos accounting (accounting.ts): what
 * a raw-protocol subscriber (RawRpc) received, as accounted events, and an account's violations
 * as readable lines.
 */
import type { SubscriptionParams } from '../support/raw-rpc.js';
import { seqRanges } from './accounting.js';
import type { ReceivedEvent, SubscriptionAccount } from './accounting.js';

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

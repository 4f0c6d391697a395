/*
 * Revoked sessions kept in the broker per node (gateway.revokeSession of a session on another
 * node): the message to that node's topic is lost when its link to the broker is down, so the
 * node reads its records when the link is back (Revocations.recheck) and closes those sessions.
 * What one record holds, its bounds, its encoding, and the in-memory list of MemoryBroker. The
 * Redis and NATS lists are in session-deny-list-redis.ts and session-deny-list-nats.ts.
 */
import { DEFAULT_DENY_FOR_MS } from './deny-list.js';

/** One revoked session of a node, as the broker keeps it. */
export interface SessionDenial {
  session: string;
  /** When the latest revocation was made (ms since the epoch, the revoking node's clock). */
  revokedAt: number;
  /** When the record lapses (ms since the epoch). */
  until: number;
  /** The close reason of the latest revocation, at most MAX_CLOSE_REASON_BYTES. */
  reason: string;
}

/** How long the broker keeps a revoked session by default: as long as a user is listed (1 h). */
export const DEFAULT_SESSION_DENY_FOR_MS = DEFAULT_DENY_FOR_MS;

/**
 * Revoked sessions a broker keeps at most, by default: per node for RedisBroker, in all for
 * MemoryBroker and NatsBroker (one bucket).
 */
export const DEFAULT_MAX_DENIED_SESSIONS = 100_000;

/** A WebSocket close reason is at most 123 bytes of UTF-8. */
export const MAX_CLOSE_REASON_BYTES = 123;

/** A close reason of at most MAX_CLOSE_REASON_BYTES, cut on a character boundary. */
export function closeReasonOf(reason: string): string {
  if (Buffer.byteLength(reason) <= MAX_CLOSE_REASON_BYTES) return reason;
  let cut = '';
  for (const char of reason) {
    if (Buffer.byteLength(cut + char) > MAX_CLOSE_REASON_BYTES) break;
    cut += char;
  }
  return cut;
}

/**
 * A revocation of a session refused because the broker already keeps its maximum of revoked
 * sessions (MemoryBroker and RedisBroker: none of them lapsed; NatsBroker: lapsed ones count
 * until the bucket's max age drops them). Nothing is dropped to make room: a record dropped
 * would leave its session open on a node that was cut off. The session's node was not told.
 */
export class SessionDenyListFullError extends Error {
  override readonly name = 'SessionDenyListFullError';
  constructor(
    readonly maxDeniedSessions: number,
    /** The node the bound is counted for; undefined when it counts every node's records. */
    readonly node?: string,
  ) {
    super(
      `Session deny list full: it holds at most ${maxDeniedSessions} revoked sessions${
        node === undefined ? '' : ` of node "${node}"`
      }`,
    );
  }
}

/**
 * Two revocations of one session as one record: the newer revocation with its reason, and the
 * later end (a second revocation never shortens the first's).
 */
export function mergeSessionDenials(
  current: SessionDenial | undefined,
  next: SessionDenial,
): SessionDenial {
  if (!current) return next;
  const newer = next.revokedAt >= current.revokedAt ? next : current;
  return { ...newer, until: Math.max(current.until, next.until) };
}

/** A record as the NATS list stores it (JSON). */
export function encodeSessionDenial(denial: SessionDenial): string {
  return JSON.stringify(denial);
}

/** A record as stored; undefined for anything else. */
export function decodeSessionDenial(text: string): SessionDenial | undefined {
  let value: Partial<Record<keyof SessionDenial, unknown>> | null;
  try {
    value = JSON.parse(text) as typeof value;
  } catch {
    return undefined;
  }
  const { session, revokedAt, until, reason } = value ?? {};
  if (typeof session !== 'string' || typeof reason !== 'string') return undefined;
  if (!Number.isFinite(revokedAt) || !Number.isFinite(until)) return undefined;
  return { session, revokedAt: revokedAt as number, until: until as number, reason };
}

/**
 * MemoryBroker's revoked sessions: a Map per node, each record dropped once it lapses (when its
 * node's records are read, and in a sweep when the list is full). At most `maxEntries` records
 * in all.
 */
export class MemorySessionDenyList {
  private readonly nodes = new Map<string, Map<string, SessionDenial>>();
  private count = 0;

  constructor(
    private readonly now: () => number,
    private readonly maxEntries = DEFAULT_MAX_DENIED_SESSIONS,
  ) {}

  /** Records kept (lapsed ones not swept yet included). */
  get size(): number {
    return this.count;
  }

  deny(node: string, session: string, revokedAt: number, forMs: number, reason: string): void {
    const now = this.now();
    let records = this.nodes.get(node);
    const current = records?.get(session);
    const live = current && current.until > now ? current : undefined;
    if (!current && this.count >= this.maxEntries) {
      this.sweep(now);
      if (this.count >= this.maxEntries) throw new SessionDenyListFullError(this.maxEntries);
      records = this.nodes.get(node);
    }
    if (!records) this.nodes.set(node, (records = new Map<string, SessionDenial>()));
    if (!current) this.count++;
    const next = { session, revokedAt, until: now + forMs, reason: closeReasonOf(reason) };
    records.set(session, mergeSessionDenials(live, next));
  }

  /** The node's records that have not lapsed. */
  denied(node: string): SessionDenial[] {
    const records = this.nodes.get(node);
    if (!records) return [];
    this.sweepNode(node, records, this.now());
    return [...records.values()];
  }

  clear(): void {
    this.nodes.clear();
    this.count = 0;
  }

  private sweep(now: number): void {
    for (const [node, records] of this.nodes) this.sweepNode(node, records, now);
  }

  private sweepNode(node: string, records: Map<string, SessionDenial>, now: number): void {
    for (const [session, denial] of records) {
      if (denial.until > now) continue;
      records.delete(session);
      this.count--;
    }
    if (records.size === 0) this.nodes.delete(node);
  }
}

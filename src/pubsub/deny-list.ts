/*
 * The deny list of revoked users (gateway.revokeUser), kept in the broker so that every node
 * sees it: what one entry holds, its bounds, and the in-memory list of MemoryBroker. The Redis
 * and NATS lists are in deny-list-redis.ts and deny-list-nats.ts.
 */

/** One user on the deny list: the latest revocation, and until when the user stays listed. */
export interface Denial {
  /** When the latest revocation was made (ms since the epoch, the revoking node's clock). */
  revokedAt: number;
  /** When the entry lapses (ms since the epoch). */
  until: number;
}

/** How long `revokeUser` lists a user by default: one hour. */
export const DEFAULT_DENY_FOR_MS = 3_600_000;

/** The longest a revocation may list a user (24 hours): also the NATS bucket's max age. */
export const MAX_DENY_FOR_MS = 86_400_000;

/** Users a MemoryBroker's or a NatsBroker's deny list holds at most, by default. */
export const DEFAULT_MAX_DENIED_USERS = 100_000;

/**
 * A revocation refused because the deny list already holds its maximum of users, none of
 * them lapsed. Nothing is dropped to make room: an entry dropped would let a revoked user in.
 */
export class DenyListFullError extends Error {
  override readonly name = 'DenyListFullError';
  constructor(readonly maxDeniedUsers: number) {
    super(`Deny list full: it holds at most ${maxDeniedUsers} users, none of them lapsed yet`);
  }
}

/**
 * Two revocations of one user as one entry: the newer revocation time (credentials must be
 * issued after it) and the later end (a shorter revocation never shortens a longer one).
 */
export function mergeDenials(current: Denial | undefined, next: Denial): Denial {
  if (!current) return next;
  return {
    revokedAt: Math.max(current.revokedAt, next.revokedAt),
    until: Math.max(current.until, next.until),
  };
}

/** `revokedAt:until`, as the Redis and NATS lists store an entry. */
export function encodeDenial(denial: Denial): string {
  return `${denial.revokedAt}:${denial.until}`;
}

/** An entry as stored; undefined for anything else. */
export function decodeDenial(text: string): Denial | undefined {
  const match = /^(\d+):(\d+)$/.exec(text);
  if (!match) return undefined;
  return { revokedAt: Number(match[1]), until: Number(match[2]) };
}

/**
 * MemoryBroker's deny list: a Map of entries, each dropped once it lapses (on read, and in a
 * sweep when the list is full). At most `maxEntries` users at once.
 */
export class MemoryDenyList {
  private readonly entries = new Map<string, Denial>();

  constructor(
    private readonly now: () => number,
    private readonly maxEntries = DEFAULT_MAX_DENIED_USERS,
  ) {}

  /** Users listed (lapsed entries not swept yet included). */
  get size(): number {
    return this.entries.size;
  }

  deny(user: string, revokedAt: number, forMs: number): void {
    const now = this.now();
    const current = this.denied(user, now);
    if (!current && this.entries.size >= this.maxEntries) {
      this.sweep(now);
      if (this.entries.size >= this.maxEntries) throw new DenyListFullError(this.maxEntries);
    }
    this.entries.set(user, mergeDenials(current, { revokedAt, until: now + forMs }));
  }

  denied(user: string, now = this.now()): Denial | undefined {
    const denial = this.entries.get(user);
    if (!denial) return undefined;
    if (denial.until > now) return denial;
    this.entries.delete(user);
    return undefined;
  }

  clear(): void {
    this.entries.clear();
  }

  private sweep(now: number): void {
    for (const [user, denial] of this.entries) if (denial.until <= now) this.entries.delete(user);
  }
}

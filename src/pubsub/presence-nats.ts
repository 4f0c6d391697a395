/*
 * NatsBroker's presence store: a JetStream key-value bucket (nats-kv.ts), `<prefix>-presence`
 * (the stream `KV_<prefix>-presence`, in memory: after a NATS restart each node finds its lease
 * gone at its next renewal and writes its members again). Keys, each part one subject token
 * (encodeTopic):
 *
 * - `m.<topic>.<owner>.<member key>`: a member, `[owner, sessionId, user, info, topic, key]` as
 *   JSON (the token of a long name is a digest, so the value names the topic and key);
 * - `o.<owner>`: the owner's lease, `{"lease": ms}`, lapsed once NATS's clock is `ms` past when
 *   it stored it; or a reaper's claim on a lapsed owner, `{"reaping": ms}`.
 *
 * Leases are renewed, and lapsed ones claimed, by compare-and-swap on the key's last sequence,
 * so of a renewal and a claim racing, or two reapers, one wins. Lapse is judged by NATS's clock
 * alone (the time it stored the lease against the time a reaper's scan started), not the nodes'.
 * A claimed owner's members are read, purged, then its lease key; a reaper that dies meanwhile
 * lets its claim lapse and another node finishes. A topic's count and its pages come from a
 * scan of `m.<topic>.>` (pages in the order members were written; the cursor is the last one's
 * sequence).
 */
import { NatsKvBucket, isWrongLastSequence } from './nats-kv.js';
import type { NatsKvEntry } from './nats-kv.js';
import { bounded } from './nats-link.js';
import type { Link } from './nats-link.js';
import { encodeTopic } from './nats-names.js';
import { isNoResponders, isStreamNotFound } from './nats-streams.js';
import { entryOf, keepRetired } from './presence.js';
import type { PresenceEntry, PresencePage, PresenceStore, ReapedMembers } from './presence.js';

/** The bucket of presence under `prefix`. */
export function natsPresenceBucket(prefix: string): { bucket: string; stream: string } {
  const bucket = `${prefix}-presence`;
  return { bucket, stream: `KV_${bucket}` };
}

/** A lease key's value: a live lease, or a reaper's claim. */
type LeaseValue = { lease: number } | { reaping: number };

const memberKey = (topic: string, owner: string, key: string): string =>
  `m.${encodeTopic(topic)}.${encodeTopic(owner)}.${encodeTopic(key)}`;
const ownerMembers = (ownerToken: string): string => `m.*.${ownerToken}.*`;
const leaseKey = (ownerToken: string): string => `o.${ownerToken}`;

export class NatsPresenceStore implements PresenceStore {
  private readonly bucket: NatsKvBucket;
  /** This node's owners' lease keys as last written here: what their renewal expects. */
  private readonly leaseSeqs = new Map<string, number>();
  /** Owners whose lease this node made, or is making (one attempt per owner at a time). */
  private readonly leasing = new Map<string, Promise<void>>();
  /**
   * Owners found lapsed or released: a late write under one is refused rather than make it a
   * lease again (its members would be listed twice, then reaped as leaving). One per lapse, the
   * latest RETIRED_OWNERS_KEPT kept.
   */
  private readonly retired = new Set<string>();

  constructor(
    prefix: string,
    replicas: number,
    private readonly timeoutMs: number,
    /** The live connection, or a NatsBrokerUnavailableError naming `what`. */
    private readonly link: (what: string) => Link,
    /** How long a reaper's claim on a lapsed owner holds before another node may finish it. */
    private readonly claimMs = 30_000,
  ) {
    this.bucket = new NatsKvBucket(
      {
        bucket: natsPresenceBucket(prefix).bucket,
        replicas,
        // Members are bounded by the sessions and their subscriptions, leases by the nodes.
        maxEntries: -1,
        discard: 'new',
        maxAgeMs: 0,
        storage: 'memory',
      },
      timeoutMs,
    );
  }

  write(
    topic: string,
    owner: string,
    joined: readonly PresenceEntry[],
    left: readonly string[],
    leaseMs: number,
  ): Promise<void> {
    return this.run(`write the members of "${topic}"`, async (link) => {
      // The lease first: a member is never written without a lease a reaper finds.
      await this.lease(link, owner, leaseMs);
      await Promise.all([
        ...joined.map((entry) =>
          this.bucket.put(
            link,
            memberKey(topic, owner, entry.key),
            encodeMember(topic, owner, entry),
          ),
        ),
        ...left.map((key) => this.bucket.purge(link, memberKey(topic, owner, key))),
      ]);
    });
  }

  async renew(owner: string, leaseMs: number): Promise<boolean> {
    const key = leaseKey(encodeTopic(owner));
    return bounded(`renew the presence lease of "${owner}"`, this.timeoutMs, async () => {
      const link = this.link(`renew the presence lease of "${owner}"`);
      let seq = this.leaseSeqs.get(owner);
      try {
        if (seq === undefined) {
          const last = await this.bucket.last(link, key);
          const value = last ? readLease(last.string()) : undefined;
          if (!last || !value || !('lease' in value)) return false;
          seq = last.seq;
        }
        this.leaseSeqs.set(owner, await this.bucket.put(link, key, leaseValue(leaseMs), seq));
        return true;
      } catch (err) {
        // Claimed by a reaper, or gone with the bucket (NATS restarted): lapsed.
        if (!isWrongLastSequence(err) && !isStreamNotFound(err) && !isNoResponders(err)) throw err;
        if (!isWrongLastSequence(err)) this.bucket.forget();
        this.forgetOwner(owner);
        keepRetired(this.retired, owner);
        return false;
      }
    });
  }

  async reap(): Promise<ReapedMembers[]> {
    const leases = await this.run('read the presence leases', (link) =>
      this.bucket.scan(link, 'o.*'),
    );
    const reaped: ReapedMembers[] = [];
    for (const lease of leases.entries) {
      const value = readLease(lease.value);
      const heldMs = value ? ('lease' in value ? value.lease : value.reaping) : 0;
      if (leases.now - lease.storedAt <= heldMs) continue;
      const ownerToken = lease.key.slice('o.'.length);
      const claimed = await this.run(`claim the lapsed presence of "${ownerToken}"`, (link) =>
        this.claim(link, lease),
      );
      if (claimed) reaped.push(...(await this.removeOwner(ownerToken)));
    }
    return reaped;
  }

  async release(owner: string): Promise<void> {
    this.forgetOwner(owner);
    keepRetired(this.retired, owner);
    await this.removeOwner(encodeTopic(owner));
  }

  count(topic: string): Promise<number> {
    return this.run(
      `count the members of "${topic}"`,
      async (link) => (await this.bucket.scan(link, `m.${encodeTopic(topic)}.*.*`, 0, 0)).matched,
    );
  }

  members(topic: string, cursor: string | undefined, limit: number): Promise<PresencePage> {
    const after = cursor === undefined ? 0 : Number(cursor);
    if (!Number.isSafeInteger(after) || after < 0) {
      return Promise.reject(new RangeError(`cursor must be one a page returned, not "${cursor}"`));
    }
    return this.run(`read the members of "${topic}"`, async (link) => {
      const scan = await this.bucket.scan(link, `m.${encodeTopic(topic)}.*.*`, after, limit);
      const members: PresenceEntry[] = [];
      for (const stored of scan.entries) {
        const decoded = decodeMember(stored.value);
        if (decoded) members.push(decoded.entry);
      }
      const last = scan.entries.at(-1);
      return scan.matched > limit && last ? { members, cursor: String(last.seq) } : { members };
    });
  }

  /** Make the owner's lease unless this node did already. */
  private lease(link: Link, owner: string, leaseMs: number): Promise<void> {
    if (this.retired.has(owner)) {
      return Promise.reject(new Error(`presence owner ${owner} lapsed: nothing written`));
    }
    let leasing = this.leasing.get(owner);
    if (!leasing) {
      leasing = this.makeLease(link, owner, leaseMs);
      this.leasing.set(owner, leasing);
      leasing.catch(() => this.leasing.delete(owner));
    }
    return leasing;
  }

  private async makeLease(link: Link, owner: string, leaseMs: number): Promise<void> {
    const key = leaseKey(encodeTopic(owner));
    try {
      this.leaseSeqs.set(owner, await this.bucket.put(link, key, leaseValue(leaseMs), 0));
    } catch (err) {
      if (!isWrongLastSequence(err)) throw err;
      // There already: this owner's (kept), or a reaper's claim (no lease back: the node learns
      // it lapsed at its next renewal).
      const last = await this.bucket.last(link, key);
      const value = last ? readLease(last.string()) : undefined;
      if (last && value && 'lease' in value) this.leaseSeqs.set(owner, last.seq);
    }
  }

  /** Claim a lapsed owner (its lease or a lapsed claim) for this node; false when another won. */
  private async claim(link: Link, lease: NatsKvEntry): Promise<boolean> {
    try {
      await this.bucket.put(
        link,
        lease.key,
        JSON.stringify({ reaping: this.claimMs } satisfies LeaseValue),
        lease.seq,
      );
      return true;
    } catch (err) {
      if (isWrongLastSequence(err)) return false;
      throw err;
    }
  }

  /** Remove an owner's members (read first, for the leave events), then its lease key. */
  private removeOwner(ownerToken: string): Promise<ReapedMembers[]> {
    return this.run(`remove the presence of "${ownerToken}"`, async (link) => {
      const scan = await this.bucket.scan(link, ownerMembers(ownerToken));
      const byTopic = new Map<string, PresenceEntry[]>();
      for (const stored of scan.entries) {
        const decoded = decodeMember(stored.value);
        if (!decoded) continue;
        const list = byTopic.get(decoded.topic);
        if (list) list.push(decoded.entry);
        else byTopic.set(decoded.topic, [decoded.entry]);
      }
      // Everything of the owner goes, members written since the scan too (silently: the owner
      // writes them again under a new lease once it finds this one gone).
      await this.bucket.purge(link, ownerMembers(ownerToken));
      await this.bucket.purge(link, leaseKey(ownerToken));
      return [...byTopic].map(([topic, members]) => ({ topic, members }));
    });
  }

  private forgetOwner(owner: string): void {
    this.leaseSeqs.delete(owner);
    this.leasing.delete(owner);
  }

  /** `op` on the live connection with the bucket made, within the timeout; made again once if found gone. */
  private run<T>(what: string, op: (link: Link) => Promise<T>): Promise<T> {
    return bounded(what, this.timeoutMs, async () => {
      const link = this.link(what);
      await this.bucket.ensure(link);
      try {
        return await op(link);
      } catch (err) {
        if (!isStreamNotFound(err) && !isNoResponders(err)) throw err;
        // The bucket went (a NATS restart, its memory storage lost): made again.
        this.bucket.forget();
        await this.bucket.ensure(link);
        return op(link);
      }
    });
  }
}

function leaseValue(leaseMs: number): string {
  return JSON.stringify({ lease: leaseMs } satisfies LeaseValue);
}

function readLease(text: string): LeaseValue | undefined {
  try {
    const value = JSON.parse(text) as Record<string, unknown>;
    if (typeof value['lease'] === 'number') return { lease: value['lease'] };
    if (typeof value['reaping'] === 'number') return { reaping: value['reaping'] };
  } catch {
    // Not ours: treated as lapsed.
  }
  return undefined;
}

function encodeMember(topic: string, owner: string, entry: PresenceEntry): string {
  return JSON.stringify([
    owner,
    entry.sessionId,
    entry.user ?? null,
    entry.info ?? null,
    topic,
    entry.key,
  ]);
}

function decodeMember(text: string): { topic: string; entry: PresenceEntry } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(value) || typeof value[4] !== 'string' || typeof value[5] !== 'string') {
    return undefined;
  }
  const decoded = entryOf(value[5], value);
  return decoded && { topic: value[4], entry: decoded.entry };
}

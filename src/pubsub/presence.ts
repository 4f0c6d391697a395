/*
 * Presence: who is subscribed to a topic, kept in the broker so that every node sees the same
 * members. A member is one subscription of a session to the topic, owned by the node holding the
 * session. Each node writes its members under an owner id whose lease it renews; when a lease
 * lapses (the node died), any other node removes that owner's members (`reap`). This file holds
 * the store's interface, its bounds and MemoryBroker's store; the Redis and NATS stores are in
 * presence-redis.ts and presence-nats.ts.
 */

/** One member of a topic, as the server and clients see it. */
export interface PresenceMember {
  /**
   * This membership (one subscription of the session), unique among the topic's members: two
   * subscriptions of one session are two members, and a leave names the one that ended. A node
   * whose lease lapsed writes its members again under new ids, announcing the old ones as left.
   */
  id: string;
  sessionId: string;
  /** The session's user (GatewayOptions.userOf), when it has one. */
  user?: string;
  /** What the topic's `presence.info` said about the session (at most 1 KiB of JSON). */
  info?: Record<string, unknown>;
}

/**
 * A member as the store keeps it: `key` names one membership (`<sessionId>/<n>`, `n` never used
 * twice on a node), not the subscription id, which a session is given again for a later
 * subscription to the same topic (the topic's shared id, once free).
 */
export interface PresenceEntry extends Omit<PresenceMember, 'id'> {
  key: string;
}

/** A page of a topic's members, and where the next page starts (undefined: none after it). */
export interface PresencePage {
  members: PresenceEntry[];
  cursor?: string;
}

/** The members an owner whose lease lapsed had in one topic, removed by `reap`. */
export interface ReapedMembers {
  topic: string;
  members: PresenceEntry[];
}

/** How long a node's lease lasts unless renewed, by default (GatewayOptions.presenceLeaseMs). */
export const DEFAULT_PRESENCE_LEASE_MS = 15_000;
/** The window join/leave events are gathered over, by default (GatewayOptions.presenceCoalesceMs). */
export const DEFAULT_PRESENCE_COALESCE_MS = 250;
/** Members listed at most, in one event's lists and in a first page, by default. */
export const DEFAULT_PRESENCE_MAX_LISTED = 1_000;
/** The largest page of members one read returns. */
export const MAX_PRESENCE_PAGE = 1_000;
/** The largest `info` of one member, in bytes of JSON. */
export const MAX_PRESENCE_INFO_BYTES = 1_024;
/** The `$`-topic a topic's join/leave changes travel on between nodes. */
export const PRESENCE_EVENTS_PREFIX = '$presence.';

/**
 * How many of the owners it found lapsed or released a store remembers (the latest), refusing a
 * late write under one. A node takes a new owner at each lapse and releases the old one once
 * the writes under it have settled (PresenceService), so a write under an owner older than the
 * last few cannot come; remembering every one would keep one entry per lapse for the life of
 * the process.
 */
export const RETIRED_OWNERS_KEPT = 64;

/** Add `owner` to `owners` (insertion-ordered), dropping the oldest past RETIRED_OWNERS_KEPT. */
export function keepRetired(owners: Set<string>, owner: string): void {
  owners.add(owner);
  for (const oldest of owners) {
    if (owners.size <= RETIRED_OWNERS_KEPT) break;
    owners.delete(oldest);
  }
}

/**
 * Where a broker keeps presence. Every method may reject when the broker is unavailable.
 * An `owner` is a node's lease id: its members are written under it, and removed by any node
 * once its lease has lapsed.
 */
export interface PresenceStore {
  /**
   * Add `joined` and remove the members keyed `left`, all owned by `owner`, and renew the
   * owner's lease to now + `leaseMs`. No key is in both (a key names one membership).
   */
  write(
    topic: string,
    owner: string,
    joined: readonly PresenceEntry[],
    left: readonly string[],
    leaseMs: number,
  ): Promise<void>;
  /**
   * Renew the owner's lease to now + `leaseMs`. False when the owner had no lease any more
   * (it lapsed, and its members were or are being reaped): the node then writes its members
   * again under a new owner id.
   */
  renew(owner: string, leaseMs: number): Promise<boolean>;
  /** Remove every member of every owner whose lease has lapsed; what was removed, by topic. */
  reap(): Promise<ReapedMembers[]>;
  /** Remove the owner's lease and members at once (a node closing). */
  release(owner: string): Promise<void>;
  /** Members of `topic` (0 when none). */
  count(topic: string): Promise<number>;
  /** Up to `limit` members of `topic` after `cursor` (from the start without one). */
  members(topic: string, cursor: string | undefined, limit: number): Promise<PresencePage>;
}

/** A page size: a whole number from 1 to MAX_PRESENCE_PAGE, or a RangeError naming `limit`. */
export function presencePageLimit(limit: number | undefined, fallback: number): number {
  const value = limit ?? fallback;
  if (!Number.isInteger(value) || value < 1 || value > MAX_PRESENCE_PAGE) {
    throw new RangeError(
      `limit must be an integer from 1 to ${MAX_PRESENCE_PAGE}, not ${String(limit)}`,
    );
  }
  return value;
}

/** A member as stored in Redis and NATS: `[owner, sessionId, user, info]` as JSON. */
export function encodeEntry(owner: string, entry: PresenceEntry): string {
  return JSON.stringify([owner, entry.sessionId, entry.user ?? null, entry.info ?? null]);
}

/** A stored member back; undefined for anything else. */
export function decodeEntry(
  key: string,
  text: string,
): { owner: string; entry: PresenceEntry } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return entryOf(key, value);
}

/** A stored member already parsed (`encodeEntry`'s list, maybe longer); undefined for anything else. */
export function entryOf(
  key: string,
  value: unknown,
): { owner: string; entry: PresenceEntry } | undefined {
  if (!Array.isArray(value) || typeof value[0] !== 'string' || typeof value[1] !== 'string') {
    return undefined;
  }
  const entry: PresenceEntry = { key, sessionId: value[1] };
  if (typeof value[2] === 'string') entry.user = value[2];
  if (value[3] && typeof value[3] === 'object') entry.info = value[3] as Record<string, unknown>;
  return { owner: value[0], entry };
}

/** The member as clients see it: its store key is its id. */
export function publicMember(entry: PresenceEntry): PresenceMember {
  const member: PresenceMember = { id: entry.key, sessionId: entry.sessionId };
  if (entry.user !== undefined) member.user = entry.user;
  if (entry.info !== undefined) member.info = entry.info;
  return member;
}

interface Held {
  owner: string;
  entry: PresenceEntry;
}

/**
 * MemoryBroker's store: a Map of members per topic, each owner's lease and, per owner, the keys
 * of its members in each topic it has any in (a topic leaves that list with the owner's last
 * member in it, so the list stays as long as what the owner holds). Pages are in key order (the
 * cursor is the last key of the page before).
 */
export class MemoryPresenceStore implements PresenceStore {
  private readonly topics = new Map<string, Map<string, Held>>();
  private readonly leases = new Map<string, number>();
  /** owner -> topic -> the keys of its members there; a key is here iff `topics` says so. */
  private readonly ownedTopics = new Map<string, Map<string, Set<string>>>();

  constructor(private readonly now: () => number = Date.now) {}

  write(
    topic: string,
    owner: string,
    joined: readonly PresenceEntry[],
    left: readonly string[],
    leaseMs: number,
  ): Promise<void> {
    this.leases.set(owner, this.now() + leaseMs);
    let members = this.topics.get(topic);
    if (joined.length > 0) {
      if (!members) this.topics.set(topic, (members = new Map<string, Held>()));
      let owned = this.ownedTopics.get(owner);
      if (!owned) this.ownedTopics.set(owner, (owned = new Map<string, Set<string>>()));
      let keys = owned.get(topic);
      if (!keys) owned.set(topic, (keys = new Set<string>()));
      for (const entry of joined) {
        // A key another owner held moves to this one: it is no longer the other's to reap.
        const held = members.get(entry.key);
        if (held && held.owner !== owner) this.disown(held.owner, topic, entry.key);
        members.set(entry.key, { owner, entry });
        keys.add(entry.key);
      }
    }
    if (members) {
      for (const key of left) {
        if (members.get(key)?.owner !== owner) continue;
        members.delete(key);
        this.disown(owner, topic, key);
      }
      if (members.size === 0) this.topics.delete(topic);
    }
    return Promise.resolve();
  }

  renew(owner: string, leaseMs: number): Promise<boolean> {
    if (!this.leases.has(owner)) return Promise.resolve(false);
    this.leases.set(owner, this.now() + leaseMs);
    return Promise.resolve(true);
  }

  reap(): Promise<ReapedMembers[]> {
    const now = this.now();
    const reaped: ReapedMembers[] = [];
    for (const [owner, until] of this.leases) {
      if (until > now) continue;
      reaped.push(...this.drop(owner));
    }
    return Promise.resolve(reaped);
  }

  release(owner: string): Promise<void> {
    this.drop(owner);
    return Promise.resolve();
  }

  count(topic: string): Promise<number> {
    return Promise.resolve(this.topics.get(topic)?.size ?? 0);
  }

  members(topic: string, cursor: string | undefined, limit: number): Promise<PresencePage> {
    const keys = [...(this.topics.get(topic)?.keys() ?? [])].sort();
    const from = cursor === undefined ? 0 : keys.findIndex((key) => key > cursor);
    const members = this.topics.get(topic);
    if (!members || from < 0) return Promise.resolve({ members: [] });
    const page = keys.slice(from, from + limit);
    const more = from + limit < keys.length;
    return Promise.resolve({
      members: page.map((key) => members.get(key)!.entry),
      ...(more ? { cursor: page[page.length - 1] } : {}),
    });
  }

  private drop(owner: string): ReapedMembers[] {
    this.leases.delete(owner);
    const reaped: ReapedMembers[] = [];
    for (const [topic, keys] of this.ownedTopics.get(owner) ?? []) {
      const members = this.topics.get(topic);
      if (!members) continue;
      const removed: PresenceEntry[] = [];
      for (const key of keys) {
        const held = members.get(key);
        if (held?.owner !== owner) continue;
        members.delete(key);
        removed.push(held.entry);
      }
      if (members.size === 0) this.topics.delete(topic);
      if (removed.length > 0) reaped.push({ topic, members: removed });
    }
    this.ownedTopics.delete(owner);
    return reaped;
  }

  /** `key` in `topic` is no longer `owner`'s: the topic leaves its list with its last member. */
  private disown(owner: string, topic: string, key: string): void {
    const owned = this.ownedTopics.get(owner);
    const keys = owned?.get(topic);
    if (!owned || !keys?.delete(key) || keys.size > 0) return;
    owned.delete(topic);
    if (owned.size === 0) this.ownedTopics.delete(owner);
  }
}

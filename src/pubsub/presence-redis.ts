/*
 * RedisBroker's presence store. Per topic, in the topic's cluster slot: a hash
 * `<prefix>{topic}:presence` (member key -> `[owner, sessionId, user, info]` as JSON), a sorted
 * set `...:presence:keys` (the member keys, score 0, read in lexical order for pages) and a set
 * per owner `...:presence:o:<owner>` (its member keys, for reaping). Per owner: its lease in the
 * sorted set `<prefix>{presence}:leases` (score: when it lapses, Redis time in ms) and the topics
 * it has members in, `<prefix>{presence}:owner:<owner>`: a topic is listed there before the
 * owner's first member in it is written, and unlisted once its last one has left (the write
 * that empties the owner's set answers 0), so the list is as long as what the owner holds. A
 * lapsed owner is claimed by moving it to `<prefix>{presence}:reaping` (so a second reaper, or
 * the owner's own renewal, cannot take it), its members removed topic by topic, then the claim
 * dropped; a reaper that dies meanwhile lets the claim lapse and another node finishes. Every
 * step is one Lua script; the topic's keys and the owner's keys live in separate scripts so
 * each touches one cluster slot, which is why one owner's writes to one topic go one at a time
 * (see `write`).
 */
import { decodeEntry, encodeEntry, keepRetired } from './presence.js';
import type { PresenceEntry, PresencePage, PresenceStore, ReapedMembers } from './presence.js';
import { script } from './redis-script-runner.js';
import type { RedisScriptRunner } from './redis-script-runner.js';

const NOW_MS = `local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

// KEYS: leases, the owner's topics, reaping. ARGV: owner, leaseMs, topic, '1' when the write
// joins members (a write that only removes needs no listing: a topic the owner has members in
// is listed already), '1' when this is the owner's first write (the one that makes its lease).
// Answers when the lease now lapses (Redis time, ms). An owner being reaped, or whose lease is
// gone (lapsed and reaped), gets no lease back and writes nothing: 0, and its node learns it
// lapsed at its next renewal.
const LEASE_LUA = `${NOW_MS}
if redis.call('ZSCORE', KEYS[3], ARGV[1]) then return 0 end
if ARGV[5] ~= '1' and not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local lapses = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], lapses, ARGV[1])
if ARGV[4] == '1' then redis.call('SADD', KEYS[2], ARGV[3]) end
return lapses`;

// KEYS: hash, keys index, the owner's set. ARGV: owner, the time (Redis's, ms) from which the
// write is refused (-1: the lease it was given may have lapsed since, and been reaped), count
// joined, then key/value pairs of the joined, then the keys that left. A leave removes a member
// only if this owner holds it. Answers how many members the owner has left in the topic (its
// set goes with the last one).
const WRITE_LUA = `${NOW_MS}
if now >= tonumber(ARGV[2]) then return -1 end
local owner, joined = ARGV[1], tonumber(ARGV[3])
local i = 4
for _ = 1, joined do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[2], 0, ARGV[i])
  redis.call('SADD', KEYS[3], ARGV[i])
  i = i + 2
end
for j = i, #ARGV do
  if redis.call('SREM', KEYS[3], ARGV[j]) == 1 then
    redis.call('HDEL', KEYS[1], ARGV[j])
    redis.call('ZREM', KEYS[2], ARGV[j])
  end
end
return redis.call('SCARD', KEYS[3])`;

// KEYS: the owner's topics. ARGV: a topic the owner has no member in any more.
const UNLIST_LUA = `return redis.call('SREM', KEYS[1], ARGV[1])`;

// KEYS: leases. ARGV: owner, leaseMs. 0 when the owner holds no lease (lapsed and claimed).
const RENEW_LUA = `${NOW_MS}
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return 1`;

// KEYS: leases, reaping. ARGV: how long a claim holds (ms), most owners claimed at once.
// Lapsed owners, and claims whose reaper did not finish, are claimed for this caller.
const CLAIM_LUA = `${NOW_MS}
local claimed = {}
local limit = tonumber(ARGV[2])
for _, owner in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)) do
  redis.call('ZREM', KEYS[1], owner)
  table.insert(claimed, owner)
end
for _, owner in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, limit)) do
  table.insert(claimed, owner)
end
for _, owner in ipairs(claimed) do
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]), owner)
end
return claimed`;

// KEYS: leases, the owner's topics. ARGV: owner. Its lease gone at once (a node closing).
const DROP_LEASE_LUA = `redis.call('ZREM', KEYS[1], ARGV[1])
return redis.call('SMEMBERS', KEYS[2])`;

// KEYS: hash, keys index, the owner's set. ARGV: the start of the owner's stored values
// (encodeEntry's '["<owner>",'). The owner's members removed: key/value pairs. A key written
// since by another owner (the node's next one) is its, and stays.
const REAP_TOPIC_LUA = `
local removed = {}
for _, key in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  local value = redis.call('HGET', KEYS[1], key)
  if value and string.sub(value, 1, #ARGV[1]) == ARGV[1] then
    redis.call('HDEL', KEYS[1], key)
    redis.call('ZREM', KEYS[2], key)
    table.insert(removed, key)
    table.insert(removed, value)
  end
end
redis.call('DEL', KEYS[3])
return removed`;

// KEYS: reaping, the owner's topics. ARGV: owner.
const REAPED_LUA = `redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 1`;

// KEYS: hash, keys index. ARGV: the lexical start ('-' or '(<key>'), limit. Pairs, one more
// than the limit when there is more.
const PAGE_LUA = `
local keys = redis.call('ZRANGEBYLEX', KEYS[2], ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[2]) + 1)
local out = {}
for _, key in ipairs(keys) do
  table.insert(out, key)
  table.insert(out, redis.call('HGET', KEYS[1], key) or '')
end
return out`;

// KEYS: hash.
const COUNT_LUA = `return redis.call('HLEN', KEYS[1])`;

const leaseScript = script(LEASE_LUA);
const writeScript = script(WRITE_LUA);
const unlistScript = script(UNLIST_LUA);
const renewScript = script(RENEW_LUA);
const claimScript = script(CLAIM_LUA);
const dropLeaseScript = script(DROP_LEASE_LUA);
const reapTopicScript = script(REAP_TOPIC_LUA);
const reapedScript = script(REAPED_LUA);
const pageScript = script(PAGE_LUA);
const countScript = script(COUNT_LUA);

/** Lapsed owners one reap claims at most (the rest wait for the next). */
const CLAIM_BATCH = 100;

/** The Redis keys of presence under `prefix`. */
export function redisPresenceKeys(prefix: string) {
  return {
    // One hash tag: the scripts on owners touch these together (one cluster slot).
    leases: `${prefix}{presence}:leases`,
    reaping: `${prefix}{presence}:reaping`,
    ownerTopics: (owner: string) => `${prefix}{presence}:owner:${owner}`,
    topic: (topic: string, owner: string) => {
      const base = `${prefix}{${topic}}:presence`;
      return [base, `${base}:keys`, `${base}:o:${owner}`];
    },
  };
}

export class RedisPresenceStore implements PresenceStore {
  private readonly keys: ReturnType<typeof redisPresenceKeys>;
  /** The last write under way per owner and topic (settled, never rejected): the next waits. */
  private readonly writes = new Map<string, Promise<void>>();
  /**
   * Owners whose lease a write of this store made (or that it released): a later write only
   * extends a lease that is still there. One per owner this node used, a new one per lapse: the
   * latest RETIRED_OWNERS_KEPT are kept, trimmed at each release (an owner's first write after
   * the releases before it: the owner in use is never the oldest).
   */
  private readonly leasing = new Set<string>();

  constructor(
    private readonly runner: RedisScriptRunner,
    prefix: string,
    /** How long a reaper's claim on a lapsed owner holds before another node may finish it. */
    private readonly claimMs = 30_000,
  ) {
    this.keys = redisPresenceKeys(prefix);
  }

  /**
   * One owner's writes to one topic go one at a time: the owner's topic list lives in another
   * cluster slot than the topic, so the unlisting after a write that emptied the owner's set is
   * a separate script, and a join of the same owner sent meanwhile would be left unlisted.
   */
  async write(
    topic: string,
    owner: string,
    joined: readonly PresenceEntry[],
    left: readonly string[],
    leaseMs: number,
  ): Promise<void> {
    const id = JSON.stringify([owner, topic]);
    const before = this.writes.get(id);
    const written = before
      ? before.then(() => this.writeNow(topic, owner, joined, left, leaseMs))
      : this.writeNow(topic, owner, joined, left, leaseMs);
    const settled = written.then(
      () => undefined,
      () => undefined,
    );
    this.writes.set(id, settled);
    try {
      await written;
    } finally {
      if (this.writes.get(id) === settled) this.writes.delete(id);
    }
  }

  private async writeNow(
    topic: string,
    owner: string,
    joined: readonly PresenceEntry[],
    left: readonly string[],
    leaseMs: number,
  ): Promise<void> {
    const ownerTopics = this.keys.ownerTopics(owner);
    // The lease (and the owner's topic) first: a member is never written without the topic
    // listed where a reaper finds it, nor under an owner that lapsed (a write would otherwise
    // give a reaped owner its lease back, and its node would never learn its members went).
    const first = !this.leasing.has(owner);
    this.leasing.add(owner);
    const lapses = Number(
      await this.runner.run(
        leaseScript,
        [this.keys.leases, ownerTopics, this.keys.reaping],
        [owner, String(leaseMs), topic, joined.length > 0 ? '1' : '0', first ? '1' : '0'],
      ),
    );
    if (!(lapses > 0)) throw lapsed(owner);
    // The write is a second script (another slot): a node that pauses in between (a long GC, a
    // busy loop) may find its lease lapsed and reaped by then, and a member written under the
    // reaped owner would be in no list a release or a reaper walks: in the store for good. So
    // the write is refused from the time the lease lapses, less a third of it for the clocks
    // of a cluster's nodes, and the node's next renewal learns of the lapse.
    const refusedFrom = lapses - Math.ceil(leaseMs / 3);
    const args = [owner, String(refusedFrom), String(joined.length)];
    for (const entry of joined) args.push(entry.key, encodeEntry(owner, entry));
    args.push(...left);
    const remaining = Number(
      await this.runner.run(writeScript, this.keys.topic(topic, owner), args),
    );
    if (remaining < 0) throw lapsed(owner);
    // The owner's last member here left: the topic leaves its list, so the list names only
    // topics it has members in (what release and reaping walk).
    if (remaining === 0) await this.runner.run(unlistScript, [ownerTopics], [topic]);
  }

  async renew(owner: string, leaseMs: number): Promise<boolean> {
    return (await this.runner.run(renewScript, [this.keys.leases], [owner, String(leaseMs)])) === 1;
  }

  async reap(): Promise<ReapedMembers[]> {
    const claimed = (await this.runner.run(
      claimScript,
      [this.keys.leases, this.keys.reaping],
      [String(this.claimMs), String(CLAIM_BATCH)],
    )) as string[];
    const reaped: ReapedMembers[] = [];
    for (const owner of claimed) reaped.push(...(await this.removeOwner(owner)));
    return reaped;
  }

  async release(owner: string): Promise<void> {
    // Kept in `leasing`: a late write under the released owner finds no lease and writes nothing.
    keepRetired(this.leasing, owner);
    await this.removeOwner(owner);
  }

  async count(topic: string): Promise<number> {
    const [hash] = this.keys.topic(topic, '');
    return Number(await this.runner.run(countScript, [hash!], []));
  }

  async members(topic: string, cursor: string | undefined, limit: number): Promise<PresencePage> {
    const [hash, index] = this.keys.topic(topic, '');
    const pairs = (await this.runner.run(
      pageScript,
      [hash!, index!],
      [cursor === undefined ? '-' : `(${cursor}`, String(limit)],
    )) as string[];
    const members: PresenceEntry[] = [];
    let last: string | undefined;
    for (let i = 0; i + 1 < pairs.length && members.length < limit; i += 2) {
      last = pairs[i]!;
      const decoded = decodeEntry(last, pairs[i + 1]!);
      if (decoded) members.push(decoded.entry);
    }
    return pairs.length / 2 > limit && last !== undefined ? { members, cursor: last } : { members };
  }

  /** Remove an owner's lease, its members topic by topic, then its claim and topic list. */
  private async removeOwner(owner: string): Promise<ReapedMembers[]> {
    const ownerTopics = this.keys.ownerTopics(owner);
    const topics = (await this.runner.run(
      dropLeaseScript,
      [this.keys.leases, ownerTopics],
      [owner],
    )) as string[];
    const reaped: ReapedMembers[] = [];
    for (const topic of topics) {
      const pairs = (await this.runner.run(reapTopicScript, this.keys.topic(topic, owner), [
        `[${JSON.stringify(owner)},`,
      ])) as string[];
      const members: PresenceEntry[] = [];
      for (let i = 0; i + 1 < pairs.length; i += 2) {
        const decoded = decodeEntry(pairs[i]!, pairs[i + 1]!);
        if (decoded) members.push(decoded.entry);
      }
      if (members.length > 0) reaped.push({ topic, members });
    }
    await this.runner.run(reapedScript, [this.keys.reaping, ownerTopics], [owner]);
    return reaped;
  }
}

function lapsed(owner: string): Error {
  return new Error(`presence owner ${owner} lapsed: nothing written`);
}

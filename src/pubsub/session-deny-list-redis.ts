/*
 * RedisBroker's revoked sessions: per node, a sorted set of its revoked sessions scored by when
 * each record lapses, and a hash of each one's `revokedAt:reason`, both in the node's cluster
 * slot and expiring with the node's latest record. Lapsed records are trimmed by every write
 * and every read; a write past the node's bound, none lapsed, is refused.
 */
import {
  DEFAULT_MAX_DENIED_SESSIONS,
  SessionDenyListFullError,
  closeReasonOf,
} from './session-deny-list.js';
import type { SessionDenial } from './session-deny-list.js';
import { script } from './redis-script-runner.js';
import type { RedisScriptRunner } from './redis-script-runner.js';

// Shared by both scripts. KEYS: the node's set, its hash. Drops the records lapsed at `now`, a
// slice at a time (unpack takes a bounded number of values).
const TRIM_LUA = `
local function trim(now)
  while true do
    local lapsed = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1000)
    if #lapsed == 0 then return end
    redis.call('ZREM', KEYS[1], unpack(lapsed))
    redis.call('HDEL', KEYS[2], unpack(lapsed))
  end
end
`;

// ARGV: now, session, revokedAt, until, reason, max. 1 written, 0 refused (full). A session
// already recorded keeps the newer revocation (its time and reason) and the later end, in one
// step so two nodes revoking it at once cannot undo each other.
const DENY_SESSION_LUA = `${TRIM_LUA}
local now, session = tonumber(ARGV[1]), ARGV[2]
local revokedAt, untilAt = tonumber(ARGV[3]), tonumber(ARGV[4])
local value = ARGV[3] .. ':' .. ARGV[5]
trim(now)
local score = redis.call('ZSCORE', KEYS[1], session)
if score then
  untilAt = math.max(untilAt, tonumber(score))
  local current = redis.call('HGET', KEYS[2], session)
  local r = current and string.match(current, '^(%d+):')
  if r and tonumber(r) > revokedAt then value = current end
elseif redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[6]) then
  return 0
end
redis.call('ZADD', KEYS[1], string.format('%d', untilAt), session)
redis.call('HSET', KEYS[2], session, value)
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local px = string.format('%d', math.max(1, tonumber(last[2]) - now))
redis.call('PEXPIRE', KEYS[1], px)
redis.call('PEXPIRE', KEYS[2], px)
return 1
`;

// ARGV: now. The live records: session, until, revokedAt:reason, ... .
const DENIED_SESSIONS_LUA = `${TRIM_LUA}
trim(tonumber(ARGV[1]))
local live = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local out = {}
for i = 1, #live, 2 do
  local value = redis.call('HGET', KEYS[2], live[i])
  if value then
    out[#out + 1] = live[i]
    out[#out + 1] = live[i + 1]
    out[#out + 1] = value
  end
end
return out
`;

const denySessionScript = script(DENY_SESSION_LUA);
const deniedSessionsScript = script(DENIED_SESSIONS_LUA);

/** The Redis keys of a node's revoked sessions under the broker's prefix. */
export function redisSessionDenyKeys(prefix: string, node: string): { set: string; hash: string } {
  const base = `${prefix}deny-session:{${node}}`;
  return { set: `${base}:until`, hash: `${base}:record` };
}

export class RedisSessionDenyList {
  constructor(
    private readonly runner: RedisScriptRunner,
    private readonly prefix: string,
    private readonly maxPerNode = DEFAULT_MAX_DENIED_SESSIONS,
    private readonly now: () => number = Date.now,
  ) {}

  async deny(
    node: string,
    session: string,
    revokedAt: number,
    forMs: number,
    reason: string,
  ): Promise<void> {
    const now = this.now();
    const { set, hash } = redisSessionDenyKeys(this.prefix, node);
    const written = await this.runner.run(
      denySessionScript,
      [set, hash],
      [
        String(now),
        session,
        String(revokedAt),
        String(now + forMs),
        closeReasonOf(reason),
        String(this.maxPerNode),
      ],
    );
    if (written === 0) throw new SessionDenyListFullError(this.maxPerNode, node);
  }

  async denied(node: string): Promise<SessionDenial[]> {
    const { set, hash } = redisSessionDenyKeys(this.prefix, node);
    const now = this.now();
    const reply = await this.runner.run(deniedSessionsScript, [set, hash], [String(now)]);
    const flat = Array.isArray(reply) ? (reply as unknown[]) : [];
    const records: SessionDenial[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) {
      const [session, until, value] = [flat[i], Number(flat[i + 1]), flat[i + 2]];
      if (typeof session !== 'string' || typeof value !== 'string') continue;
      const match = /^(\d+):([\s\S]*)$/.exec(value);
      // The stored end also counts, should the clocks disagree.
      if (!match || !(until > now)) continue;
      records.push({ session, revokedAt: Number(match[1]), until, reason: match[2]! });
    }
    return records;
  }
}

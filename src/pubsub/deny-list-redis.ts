/*
 * RedisBroker's deny list: one key per revoked user, `<prefix>deny:<user>`, holding
 * `revokedAt:until` and expiring with the entry (PX), so Redis drops lapsed entries itself.
 * Both scripts run through the broker's script runner (its error mapping, its call order).
 */
import { decodeDenial } from './deny-list.js';
import type { Denial } from './deny-list.js';
import { script } from './redis-script-runner.js';
import type { RedisScriptRunner } from './redis-script-runner.js';

// KEYS: the user's key. ARGV: revokedAt, until, forMs. A user already listed keeps the newer
// revocation time and the later end (mergeDenials), in one step so two nodes revoking the same
// user at once cannot undo each other.
const DENY_LUA = `
local revokedAt, untilAt, px = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local current = redis.call('GET', KEYS[1])
if current then
  local r, u = string.match(current, '^(%d+):(%d+)$')
  if r then
    revokedAt = math.max(revokedAt, tonumber(r))
    untilAt = math.max(untilAt, tonumber(u))
  end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > px then px = ttl end
end
redis.call('SET', KEYS[1], string.format('%d:%d', revokedAt, untilAt), 'PX', px)
return 1
`;

// KEYS: the user's key. Its entry, or false.
const DENIED_LUA = `return redis.call('GET', KEYS[1])`;

const denyScript = script(DENY_LUA);
const deniedScript = script(DENIED_LUA);

/** The Redis key of a user's deny-list entry under the broker's prefix. */
export function redisDenyKey(prefix: string, user: string): string {
  return `${prefix}deny:${user}`;
}

export class RedisDenyList {
  constructor(
    private readonly runner: RedisScriptRunner,
    private readonly prefix: string,
    private readonly now: () => number = Date.now,
  ) {}

  async deny(user: string, revokedAt: number, forMs: number): Promise<void> {
    const until = this.now() + forMs;
    await this.runner.run(
      denyScript,
      [redisDenyKey(this.prefix, user)],
      [String(revokedAt), String(until), String(forMs)],
    );
  }

  async denied(user: string): Promise<Denial | undefined> {
    const stored = await this.runner.run(deniedScript, [redisDenyKey(this.prefix, user)], []);
    if (typeof stored !== 'string') return undefined;
    const denial = decodeDenial(stored);
    // Redis expires the key; the stored end also counts, should the clocks disagree.
    return denial && denial.until > this.now() ? denial : undefined;
  }
}

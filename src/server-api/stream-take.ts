// Taking Redis stream entries for the consumed server API with their sizes checked inside Redis:
// a script reads (XREADGROUP) or takes over (XAUTOCLAIM) at most `count` entries, one at a time,
// and sends back only each entry's `request` field, and only when it is at most `maxBytes`. An
// entry without one, or with a larger one, is acknowledged there and reported by id. So what a
// call brings into the gateway is at most `count` × `maxBytes` bytes of requests, whatever was
// written to the stream.
import type { Redis } from 'ioredis';

/** One entry taken: its request to handle, or why it was acknowledged unhandled. */
export type TakenEntry =
  | { id: string; request: Buffer }
  | { id: string; refused: 'no request field' }
  | { id: string; refused: 'too large'; bytes: number }
  | { id: string; refused: 'delivered too often'; deliveries: number };

/** The dead-letter stream's length, about (XADD MAXLEN ~): the oldest entries go past it. */
export const DEAD_LETTER_MAX_LENGTH = 10_000;

// KEYS[1] the stream, KEYS[2] the dead-letter stream ('' for none); ARGV: group, consumer,
// count, maxBytes, the mode, maxDeliveries, the dead-letter stream's length, then ids. The mode:
// '' to read new entries, 'own' to read again the entries this consumer took and has not
// acknowledged (the ids left out: those it is handling), or the idle time in ms after which
// another consumer's entries are taken over. Entries are read one at a time so the script
// itself holds one large entry at most at once. XAUTOCLAIM names an entry deleted meanwhile as
// nil (Redis 6.2; false here) or apart (7.0), and a read of the consumer's own entries as an
// entry without fields: skipped (acknowledged, in the second case: nothing is left to handle).
// An entry taken over once it has been delivered more than maxDeliveries times (this takeover
// counted: each node that took it died or stalled with it) is not handled: it is copied to the
// dead-letter stream with its id and delivery count, and acknowledged.
const TAKE_SCRIPT = `
local stream, dead, group, consumer = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local count, maxBytes, idle = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local maxDeliveries, deadLength = tonumber(ARGV[6]), tonumber(ARGV[7])
local taken, examined, cursor = {}, 0, '0-0'
local skip = {}
for i = 8, #ARGV do skip[ARGV[i]] = true end
local takingOver = idle ~= '' and idle ~= 'own'
while examined < count do
  local entry
  if idle == '' then
    local read = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', 1, 'STREAMS', stream, '>')
    if not read then break end
    entry = read[1][2][1]
    if not entry then break end
  elseif idle == 'own' then
    local read = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', 1, 'STREAMS', stream, cursor)
    if not read then break end
    entry = read[1][2][1]
    if not entry then break end
    cursor = entry[1]
    if skip[cursor] then
      entry = nil
    elseif not entry[2] then
      redis.call('XACK', stream, group, cursor)
      entry = nil
    end
  else
    local claimed = redis.call('XAUTOCLAIM', stream, group, consumer, idle, cursor, 'COUNT', 1)
    cursor = claimed[1]
    entry = claimed[2][1]
  end
  if entry then
    examined = examined + 1
    local id, fields, request = entry[1], entry[2], nil
    for i = 1, #fields, 2 do
      if fields[i] == 'request' then request = fields[i + 1] break end
    end
    local deliveries = 0
    if takingOver and request ~= nil and #request <= maxBytes then
      local pending = redis.call('XPENDING', stream, group, id, id, 1)
      if pending[1] then deliveries = pending[1][4] end
    end
    if request == nil then
      redis.call('XACK', stream, group, id)
      taken[#taken + 1] = { id, 'none', 0 }
    elseif #request > maxBytes then
      redis.call('XACK', stream, group, id)
      taken[#taken + 1] = { id, 'large', #request }
    elseif deliveries > maxDeliveries then
      if dead ~= '' then
        redis.call('XADD', dead, 'MAXLEN', '~', deadLength, '*', 'request', request,
          'id', id, 'stream', stream, 'group', group, 'deliveries', deliveries)
      end
      redis.call('XACK', stream, group, id)
      taken[#taken + 1] = { id, 'poison', deliveries }
    else
      taken[#taken + 1] = { id, 'ok', request }
    end
  end
  if takingOver and cursor == '0-0' then break end
end
return taken
`;

// KEYS[1] the stream; ARGV: group, consumer, then ids. Each id still pending for this consumer
// is claimed by it again (JUSTID: its delivery count unchanged), which makes its idle time 0:
// no other consumer takes it over while it is being handled. One taken over already (this node
// stalled past the takeover's idle time) is left to its new consumer.
const RENEW_SCRIPT = `
local stream, group, consumer = KEYS[1], ARGV[1], ARGV[2]
local renewed = 0
for i = 3, #ARGV do
  local pending = redis.call('XPENDING', stream, group, ARGV[i], ARGV[i], 1, consumer)
  if pending[1] then
    redis.call('XCLAIM', stream, group, consumer, 0, ARGV[i], 'JUSTID')
    renewed = renewed + 1
  end
end
return renewed
`;

const COMMAND = 'wsrpcTakeStreamEntries';
const RENEW = 'wsrpcRenewStreamEntries';

type RawEntry = [Buffer, Buffer, Buffer | number];
type WithTake = Redis & {
  [K in `${typeof COMMAND}Buffer`]: (...args: (string | number)[]) => Promise<RawEntry[]>;
} & { [K in typeof RENEW]: (...args: string[]) => Promise<number> };

/**
 * Make `takeEntries` and `renewEntries` available on `redis` (EVALSHA, loading the script when
 * Redis lacks it).
 */
export function defineTake(redis: Redis): void {
  redis.defineCommand(COMMAND, { numberOfKeys: 2, lua: TAKE_SCRIPT });
  redis.defineCommand(RENEW, { numberOfKeys: 1, lua: RENEW_SCRIPT });
}

/**
 * Make the idle time of `ids` 0 where they are still pending for `consumer` (they are being
 * handled): a takeover waits for entries idle `claimIdleMs`, which a request handled longer
 * would otherwise reach, and run a second time. Resolves with how many were.
 */
export function renewEntries(
  redis: Redis,
  stream: string,
  group: string,
  consumer: string,
  ids: Iterable<string>,
): Promise<number> {
  return (redis as WithTake)[RENEW](stream, group, consumer, ...ids);
}

/**
 * Read up to `count` new entries of `stream` for `consumer` of `group`; with `claimIdleMs`,
 * take over up to `count` entries other consumers left unacknowledged that long (one delivered
 * more than `maxDeliveries` times, this takeover counted, is refused: copied to `deadLetter`
 * when given, and acknowledged); with `own`, read again up to `count` of the entries this
 * consumer took and has not acknowledged, those in `own` left out (being handled: a read whose
 * reply the connection lost took the others). Rejects as XREADGROUP does (NOGROUP when the
 * stream or its group is gone).
 */
export async function takeEntries(
  redis: Redis,
  options: {
    stream: string;
    group: string;
    consumer: string;
    count: number;
    maxBytes: number;
    maxDeliveries: number;
    deadLetter: string | undefined;
    claimIdleMs?: number;
    own?: Iterable<string>;
  },
): Promise<TakenEntry[]> {
  const { stream, group, consumer, count, maxBytes, claimIdleMs, own } = options;
  const mode = own ? 'own' : claimIdleMs === undefined ? '' : claimIdleMs;
  const raw = await (redis as WithTake)[`${COMMAND}Buffer`](
    stream,
    options.deadLetter ?? '',
    group,
    consumer,
    count,
    maxBytes,
    mode,
    options.maxDeliveries,
    DEAD_LETTER_MAX_LENGTH,
    ...(own ?? []),
  );
  // Entry ids are ASCII (`<ms>-<seq>`).
  return raw.map(([id, kind, value]): TakenEntry => {
    const at = id.toString('latin1');
    switch (kind.toString('latin1')) {
      case 'ok':
        return { id: at, request: value as Buffer };
      case 'large':
        return { id: at, refused: 'too large', bytes: value as number };
      case 'poison':
        return { id: at, refused: 'delivered too often', deliveries: value as number };
      default:
        return { id: at, refused: 'no request field' };
    }
  });
}

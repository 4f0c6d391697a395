/*
 * The broker's two Lua scripts (publish, read) and the typed calls that run them. The scripts
 * are what make a topic's seq, stream and channel agree on every node; this file is the only
 * one that knows their KEYS, ARGV and reply layouts.
 */
import { randomBytes } from 'node:crypto';
import { malformedExcept, parseExcept } from './broker.js';
import type { BrokerMessage, Retention } from './broker.js';
import type { RedisTopicKeys } from './redis-keys.js';
import { script } from './redis-script-runner.js';
import type { RedisScriptRunner } from './redis-script-runner.js';

// KEYS: meta, log. ARGV: channel, payload, maxLength (-1: none), maxAgeMs (-1: none), new epoch,
// may create ('1': the topic may be created, '0': only an existing topic is published to).
// ARGV[7]: the session ids left out, as a JSON list ('' for none): a field `x` of the entry, and
// `~<list>\n` before the payload on the channel (a JSON payload never starts with `~`).
// ARGV[8], ARGV[9]: an epoch of the topic and a seq of it the publishing node has seen ('' and 0
// when none). A count below that seq in that epoch means Redis lost messages it had acknowledged
// (it came back from an older snapshot) and would hand their seqs out again under the same
// epoch: the topic is numbered anew instead, under the new epoch, as a topic Redis lost.
// ARGV[10]: how long after its history's age limit the topic's meta (its count and epoch) is
// kept: refreshed by every publish, so a topic no one publishes to is forgotten (its next
// publish starts a new numbering, as a topic Redis lost). With no age limit both are kept.
// Returns { the message's seq, 1 when this publish created the topic, the topic's epoch }, or
// { -1, 0, '' } when the topic does not exist and may not be created (nothing is written).
// Everything happens in one script, so seq order is the order of the stream and of the
// PUBLISHes that every subscriber sees.
const PUBLISH_LUA = `
local meta, log = KEYS[1], KEYS[2]
local epoch = redis.call('HGET', meta, 'e')
local created = 0
local rewound = epoch and epoch == ARGV[8]
  and tonumber(redis.call('HGET', meta, 'n') or '0') < tonumber(ARGV[9])
if not epoch or rewound then
  if not rewound and ARGV[6] ~= '1' then return {-1, 0, ''} end
  epoch = ARGV[5]
  if not rewound then created = 1 end
  redis.call('DEL', log)
  redis.call('HSET', meta, 'e', epoch, 'n', 0)
end
local seq = redis.call('HINCRBY', meta, 'n', 1)
redis.call('HSET', meta, 'a', ARGV[4])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local id = string.format('%d-0', seq)
local maxLength = tonumber(ARGV[3])
local maxAge = tonumber(ARGV[4])
local except = ARGV[7] or ''
local fields = {id, 't', string.format('%d', now), 'p', ARGV[2]}
if except ~= '' then
  fields[#fields + 1] = 'x'
  fields[#fields + 1] = except
end
if maxLength >= 0 then
  redis.call('XADD', log, 'MAXLEN', maxLength, unpack(fields))
else
  redis.call('XADD', log, unpack(fields))
end
if maxAge >= 0 then
  local cutoff = now - maxAge
  local start, count, keep, seen = '-', 1, nil, false
  while not keep do
    local batch = redis.call('XRANGE', log, start, '+', 'COUNT', count)
    if #batch == 0 then break end
    seen = true
    for i = 1, #batch do
      if tonumber(batch[i][2][2]) >= cutoff then
        keep = batch[i][1]
        break
      end
    end
    start = '(' .. batch[#batch][1]
    count = 100
  end
  if keep then
    redis.call('XTRIM', log, 'MINID', keep)
  elseif seen then
    redis.call('XTRIM', log, 'MAXLEN', 0)
  end
  redis.call('PEXPIRE', log, math.max(maxAge, 1))
  redis.call('PEXPIRE', meta, maxAge + tonumber(ARGV[10]))
else
  redis.call('PERSIST', log)
  redis.call('PERSIST', meta)
end
local live = ARGV[2]
if except ~= '' then live = '~' .. except .. '\\n' .. live end
redis.call('PUBLISH', ARGV[1], epoch .. ':' .. string.format('%d', seq) .. ':' .. live)
return {seq, created, epoch}
`;

// KEYS: meta, log. ARGV: the epoch a node delivered the topic in, a seq of it the node delivered,
// a new epoch. When the topic's count in that epoch is below that seq (Redis came back from an
// older snapshot), the topic is numbered anew under the new epoch, its stream emptied, as the
// publish script does. Returns 1 when it was, else 0.
const RENUMBER_LUA = `
local meta = KEYS[1]
if redis.call('HGET', meta, 'e') ~= ARGV[1] then return 0 end
if tonumber(redis.call('HGET', meta, 'n') or '0') >= tonumber(ARGV[2]) then return 0 end
redis.call('DEL', KEYS[2])
redis.call('HSET', meta, 'e', ARGV[3], 'n', 0)
return 1
`;

// KEYS: meta, log. ARGV: first id, last id ('+' for the end), COUNT (0: all).
// Returns { latest seq, epoch ('' when the topic does not exist), entries }, read atomically.
// Entries older than the topic's age limit (meta `a`, set by each publish) are left out: a
// publish trims them, but between publishes they would otherwise still be read.
const HISTORY_LUA = `
local state = redis.call('HMGET', KEYS[1], 'n', 'e', 'a')
if not state[2] then return {0, '', {}} end
local first, last = ARGV[1], ARGV[2]
local maxAge = tonumber(state[3])
if maxAge and maxAge >= 0 then
  local time = redis.call('TIME')
  local cutoff = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) - maxAge
  -- Entries are in publish order, so the expired ones come first: start after them.
  while true do
    local batch = redis.call('XRANGE', KEYS[2], first, last, 'COUNT', 100)
    if #batch == 0 then return {tonumber(state[1]), state[2], {}} end
    local keep
    for i = 1, #batch do
      if tonumber(batch[i][2][2]) >= cutoff then
        keep = batch[i][1]
        break
      end
    end
    if keep then
      first = keep
      break
    end
    first = '(' .. batch[#batch][1]
  end
end
local entries
if tonumber(ARGV[3]) > 0 then
  entries = redis.call('XRANGE', KEYS[2], first, last, 'COUNT', ARGV[3])
else
  entries = redis.call('XRANGE', KEYS[2], first, last)
end
return {tonumber(state[1]), state[2], entries}
`;

// The publish above, once per idempotency key: KEYS meta, log, the key's own (in the topic's
// slot), ARGV as above ('' for the left-out ids) plus the window in ms (ARGV[11]). A key still
// held answers its first seq and writes nothing ({ seq, 0, '', 1 }); else the publish runs and
// the key holds its seq for the window ({ seq, created, epoch, 0 }). One script, so two retries
// racing cannot both publish.
const PUBLISH_ONCE_LUA = `
local seen = redis.call('GET', KEYS[3])
if seen then return {tonumber(seen), 0, '', 1} end
${PUBLISH_LUA.replace(
  'return {seq, created, epoch}',
  "redis.call('SET', KEYS[3], seq, 'PX', ARGV[11])\nreturn {seq, created, epoch, 0}",
)}`;

const publishScript = script(PUBLISH_LUA);
const publishOnceScript = script(PUBLISH_ONCE_LUA);
const historyScript = script(HISTORY_LUA);
const renumberScript = script(RENUMBER_LUA);

/** One read of a topic: its epoch ('' when it does not exist), latest seq and entries. */
export interface Read {
  epoch: string;
  lastSeq: number;
  messages: BrokerMessage[];
}

/** What one publish did: its seq and whether it created the topic; undefined when refused. */
export interface Published {
  seq: number;
  /** The topic did not exist: this publish made its keys. */
  created: boolean;
  /** The epoch `seq` belongs to ('' for a duplicate, which wrote nothing). */
  epoch: string;
  /** With an idempotency key: the key was held, nothing was written (`seq` is the first's). */
  duplicate: boolean;
}

/** A seq of a topic that a node has seen (published or delivered), and the epoch it belongs to. */
export interface SeenSeq {
  epoch: string;
  seq: number;
}

/** RedisBroker's idleTopicTtlMs by default: 7 days. */
export const DEFAULT_IDLE_TOPIC_TTL_MS = 7 * 24 * 3_600_000;

/** An idempotency key for publishToTopic: its Redis key and how long it is held. */
export interface OnceKey {
  key: string;
  windowMs: number;
}

/**
 * Store and PUBLISH one message on a topic, trimming it to `retention`. When the topic does
 * not exist yet and `mayCreate` is false, nothing is written and the result is undefined. With
 * `once`, only when its key is not held (see PUBLISH_ONCE_LUA). With `seen` (a seq of the topic
 * this node has seen), a topic whose count went back below it is numbered anew first.
 */
export async function publishToTopic(
  runner: RedisScriptRunner,
  keys: RedisTopicKeys,
  payload: string,
  retention: Retention,
  mayCreate = true,
  once?: OnceKey,
  except?: readonly string[],
  seen?: SeenSeq,
  /** How long the topic's meta outlives its history's age limit (RedisBroker's idleTopicTtlMs). */
  idleTopicTtlMs = DEFAULT_IDLE_TOPIC_TTL_MS,
): Promise<Published | undefined> {
  const maxLength = Number.isFinite(retention.maxLength)
    ? Math.max(0, Math.floor(retention.maxLength))
    : -1;
  const maxAgeMs = Number.isFinite(retention.maxAgeMs)
    ? Math.max(0, Math.floor(retention.maxAgeMs))
    : -1;
  const args = [
    keys.channel,
    payload,
    String(maxLength),
    String(maxAgeMs),
    randomBytes(8).toString('hex'),
    mayCreate ? '1' : '0',
    except ? JSON.stringify(except) : '',
    seen?.epoch ?? '',
    String(seen?.seq ?? 0),
    String(Math.max(1, Math.floor(idleTopicTtlMs))),
  ];
  const reply = once
    ? await runner.run(
        publishOnceScript,
        [keys.meta, keys.log, once.key],
        [...args, String(Math.max(1, Math.floor(once.windowMs)))],
      )
    : await runner.run(publishScript, [keys.meta, keys.log], args);
  if (!Array.isArray(reply) || typeof reply[0] !== 'number') {
    throw new Error(`Redis broker: unexpected publish reply`);
  }
  const [seq, created, epoch, duplicate] = reply as [number, unknown, unknown, unknown];
  return seq < 0
    ? undefined
    : {
        seq,
        created: created === 1,
        epoch: typeof epoch === 'string' ? epoch : '',
        duplicate: duplicate === 1,
      };
}

/**
 * Number the topic anew (a new epoch, its stream emptied) if its count in `seen.epoch` is below
 * `seen.seq`: Redis came back from an older snapshot. Resolves whether it did.
 */
export async function renumberIfRewound(
  runner: RedisScriptRunner,
  keys: RedisTopicKeys,
  seen: SeenSeq,
): Promise<boolean> {
  const reply = await runner.run(
    renumberScript,
    [keys.meta, keys.log],
    [seen.epoch, String(seen.seq), randomBytes(8).toString('hex')],
  );
  return reply === 1;
}

/** Messages after `afterSeq` up to `toId`, with the topic's epoch and latest seq, atomically. */
export async function readTopic(
  runner: RedisScriptRunner,
  keys: RedisTopicKeys,
  topic: string,
  afterSeq: number,
  toId: string,
  count: number,
  /** Told of a message whose except list is malformed (it is read as leaving out nobody). */
  onMalformed?: (error: Error) => void,
): Promise<Read> {
  const after = Number.isFinite(afterSeq) ? Math.max(0, Math.floor(afterSeq)) : 0;
  const reply = await runner.run(
    historyScript,
    [keys.meta, keys.log],
    [`${after + 1}-0`, toId, String(count)],
  );
  if (!Array.isArray(reply) || reply.length !== 3) {
    throw new Error('Redis broker: unexpected history reply');
  }
  const [lastSeq, epoch, entries] = reply as [unknown, unknown, unknown];
  const messages: BrokerMessage[] = [];
  if (Array.isArray(entries)) {
    for (const entry of entries as unknown[]) {
      const message = parseEntry(topic, entry, onMalformed);
      if (message) messages.push(message);
    }
  }
  return {
    lastSeq: typeof lastSeq === 'number' ? lastSeq : Number(lastSeq),
    epoch: typeof epoch === 'string' ? epoch : '',
    messages,
  };
}

function parseEntry(
  topic: string,
  entry: unknown,
  onMalformed?: (error: Error) => void,
): BrokerMessage | undefined {
  if (!Array.isArray(entry) || entry.length < 2) return undefined;
  const [id, fields] = entry as [unknown, unknown];
  if (typeof id !== 'string' || !Array.isArray(fields)) return undefined;
  const seq = Number(id.slice(0, id.indexOf('-')));
  if (!Number.isSafeInteger(seq)) return undefined;
  const list = fields as unknown[];
  let payload: string | undefined;
  let except: readonly string[] | undefined;
  for (let i = 0; i + 1 < list.length; i += 2) {
    const value = list[i + 1];
    if (typeof value !== 'string') continue;
    if (list[i] === 'p') payload = value;
    else if (list[i] === 'x') {
      except = parseExcept(value);
      if (!except) onMalformed?.(malformedExcept(topic, seq));
    }
  }
  if (payload === undefined) return undefined;
  return except ? { topic, seq, payload, except } : { topic, seq, payload };
}

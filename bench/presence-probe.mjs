// What the presence scenario reads in a contestant's server process, without adding broker
// calls of its own: the broker's presence store writes and the messages published on the
// topic's `$presence.<topic>` channel (both counted by wrapping the broker instance's own
// methods), the commands and bytes this process sends to Redis (every ioredis connection's
// sendCommand, so the Lua scripts count as one command each: what crosses the network), the
// commands Redis executed (INFO commandstats, scripts' inner calls included, every client's:
// other users of the same Redis add theirs) and the coalesced events of `gateway.presence(topic)`.
// The store's member count is followed from the writes' own arguments as each resolves, so the
// moment count() becomes right is known without polling it.
import { nowMs } from './ipc.mjs';

const PRESENCE_CHANNEL = '$presence.';

/** Redis commands and bytes sent by this process, from the first call of `countRedisCommands`. */
const redis = { commands: 0, bytes: 0, installed: false, stats: undefined };

const byteLength = (arg) =>
  typeof arg === 'string'
    ? Buffer.byteLength(arg)
    : Buffer.isBuffer(arg)
      ? arg.length
      : String(arg).length;

/** Count every command any ioredis connection of this process sends from now on. */
export async function countRedisCommands(url) {
  if (redis.installed) return;
  redis.installed = true;
  const { Redis } = await import('ioredis');
  const send = Redis.prototype.sendCommand;
  Redis.prototype.sendCommand = function countedSendCommand(command, ...rest) {
    if (this !== redis.stats) {
      redis.commands++;
      for (const arg of command.args ?? []) redis.bytes += byteLength(arg);
    }
    return send.call(this, command, ...rest);
  };
  // Its own connection (not counted) for INFO commandstats.
  redis.stats = new Redis(url);
}

/**
 * Commands Redis has executed, from every client (INFO commandstats, the INFO calls left out):
 * those run inside Lua scripts count one each, as Redis counts them.
 */
async function redisCalls() {
  if (!redis.stats) return 0;
  const info = await redis.stats.info('commandstats');
  let calls = 0;
  for (const [, name, n] of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    if (name !== 'info') calls += Number(n);
  return calls;
}

/**
 * The probe of one gateway: `broker` is the broker instance it was created with, `topic` the
 * presence topic; `presence` false for the baseline (a topic without presence: nothing to watch).
 */
export function presenceProbe({ gateway, broker, topic, presence }) {
  const counts = { writes: 0, messages: 0, messageBytes: 0, events: 0, listed: 0, lastEventAt: 0 };
  /** Members in the store, by the writes that resolved (set from count() at each `begin`). */
  let members = 0;
  /** Waiting for `members` to reach a number: { expected, resolve }. */
  let waiter;

  if (presence) {
    const store = broker.presence;
    const write = store.write.bind(store);
    store.write = async (t, owner, joined, left, leaseMs) => {
      counts.writes++;
      await write(t, owner, joined, left, leaseMs);
      if (t !== topic) return;
      members += joined.length - left.length;
      if (waiter && members === waiter.expected) waiter.resolve(nowMs());
    };
    const publish = broker.publish.bind(broker);
    broker.publish = (t, payload, ...rest) => {
      if (t.startsWith(PRESENCE_CHANNEL)) {
        counts.messages++;
        counts.messageBytes += Buffer.byteLength(payload);
      }
      return publish(t, payload, ...rest);
    };
    gateway.presence(topic).events$.subscribe((event) => {
      counts.events++;
      counts.listed += event.joined.length + event.left.length + (event.truncated ?? 0);
      counts.lastEventAt = nowMs();
    });
  }

  return {
    /** Start of a phase: the store's count, read once. */
    async begin() {
      if (presence) members = await gateway.presence(topic).count();
      return { members };
    },
    snapshot: async () => ({
      ...counts,
      redisCommands: redis.commands,
      redisBytes: redis.bytes,
      redisCalls: await redisCalls(),
    }),
    /**
     * Wait until the store holds `expected` members (resolved with when its write did), read
     * count() once to check, then let `quietMs` pass so the last coalesced event is emitted.
     */
    async settle({ expected, quietMs, timeoutMs }) {
      let countAt;
      let count;
      if (presence) {
        let timer;
        countAt =
          members === expected
            ? nowMs()
            : await new Promise((resolve) => {
                waiter = { expected, resolve };
                timer = setTimeout(() => resolve(undefined), timeoutMs);
              });
        clearTimeout(timer);
        waiter = undefined;
        count = await gateway.presence(topic).count();
      }
      await new Promise((resolve) => setTimeout(resolve, quietMs));
      return { countAt, count, members };
    },
  };
}

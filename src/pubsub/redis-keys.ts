/*
 * Where the Redis broker keeps things: the keys and channel of a topic, and the plain channel
 * of a `$`-topic. Kept apart so that tests and tools can find a topic's data without a broker.
 */

/** The Redis keys and channel of one topic. */
export interface RedisTopicKeys {
  /**
   * Hash: `n` the topic's latest seq, `e` the topic's epoch (see {@link RedisBroker}), `a` the
   * history age limit in ms of the last publish (-1: none), which reads apply too.
   */
  meta: string;
  /** Stream: the retained messages, id `<seq>-0`, fields `t` (server ms) and `p` (payload). */
  log: string;
  /** Pub/sub channel: `<epoch>:<seq>:<payload>` for every publish. */
  channel: string;
}

/**
 * Where a topic lives under `prefix`. The topic is wrapped in a hash tag so that both
 * keys share one cluster slot, as the publish script needs.
 */
export function redisTopicKeys(prefix: string, topic: string): RedisTopicKeys {
  const base = `${prefix}{${topic}}`;
  return { meta: `${base}:meta`, log: `${base}:log`, channel: `${base}:live` };
}

/**
 * Where an idempotency key of a topic's publishes (Broker.publishOnce) is held: a string key
 * in the topic's cluster slot, holding the first publish's seq, expiring with its window.
 */
export function redisOnceKey(prefix: string, topic: string, key: string): string {
  return `${prefix}{${topic}}:once:${key}`;
}

/** Topics starting with `$` carry messages addressed to a node or a user (see SessionRouter). */
export function isDirect(topic: string): boolean {
  return topic.startsWith('$');
}

/** The plain channel of a `$`-topic: no seq, no stream. */
export function redisDirectChannel(prefix: string, topic: string): string {
  return `${prefix}direct:${topic}`;
}

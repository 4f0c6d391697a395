/*
 * NatsBroker's idempotency keys (Broker.publishOnce): a JetStream key-value bucket
 * (nats-kv.ts), `<prefix>-once` (the stream `KV_<prefix>-once`, one subject per topic and key),
 * each entry holding `seq:until`: the first publish's seq, and when its window ends (checked on
 * read). The publish itself carries the key as `Nats-Msg-Id`, so retries racing each other
 * within the topic stream's duplicate window (JetStream's, at most 2 minutes) land once,
 * atomically, and the bucket entry written after it answers the retries that come later in
 * the window.
 * Bounded: the bucket holds at most `maxEntries` keys, the oldest dropped first, and none
 * longer than a day (its max age, MAX_IDEMPOTENCY_WINDOW_MS).
 */
import { createHash } from 'node:crypto';
import { MAX_IDEMPOTENCY_WINDOW_MS } from './broker.js';
import { NatsKvBucket } from './nats-kv.js';
import type { Link } from './nats-link.js';
import { isNoResponders } from './nats-streams.js';

/** Keys the bucket holds at most by default. */
export const DEFAULT_MAX_IDEMPOTENCY_KEYS = 1_000_000;

/** The bucket, its stream, and the subject of one topic's key (a digest: any text fits). */
export function natsOnceNames(
  prefix: string,
  topic: string,
  key: string,
): { bucket: string; stream: string; subject: string; msgId: string } {
  const bucket = `${prefix}-once`;
  const digest = createHash('sha256').update(topic).update('\n').update(key).digest('hex');
  return { bucket, stream: `KV_${bucket}`, subject: `$KV.${bucket}.${digest}`, msgId: digest };
}

export class NatsOnceKeys {
  private readonly bucket: NatsKvBucket;

  constructor(
    private readonly prefix: string,
    replicas: number,
    timeoutMs: number,
    maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {
    this.bucket = new NatsKvBucket(
      {
        bucket: `${prefix}-once`,
        replicas,
        // Full: the oldest key goes (a retry of it after that would publish again).
        discard: 'old',
        maxEntries,
        maxAgeMs: MAX_IDEMPOTENCY_WINDOW_MS,
      },
      timeoutMs,
    );
  }

  /** The first publish's seq while the key's window holds; undefined otherwise. */
  async seen(link: Link, topic: string, key: string): Promise<number | undefined> {
    const names = natsOnceNames(this.prefix, topic, key);
    // No bucket yet: no key was ever held.
    const last = await this.bucket.last(link, names.msgId);
    if (!last) return undefined;
    const [seq, until] = last.string().split(':').map(Number);
    return seq !== undefined && until !== undefined && until > this.now() ? seq : undefined;
  }

  async remember(
    link: Link,
    topic: string,
    key: string,
    seq: number,
    windowMs: number,
  ): Promise<void> {
    const names = natsOnceNames(this.prefix, topic, key);
    const value = `${seq}:${this.now() + windowMs}`;
    await this.bucket.ensure(link);
    try {
      await this.bucket.put(link, names.msgId, value);
    } catch (err) {
      // Nothing stored: the bucket was deleted behind our back. Made again, written once more.
      if (!isNoResponders(err)) throw err;
      this.bucket.forget();
      await this.bucket.ensure(link);
      await this.bucket.put(link, names.msgId, value);
    }
  }
}

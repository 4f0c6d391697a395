/*
 * NatsBroker's idempotency keys (Broker.publishOnce): a JetStream key-value bucket,
 * `<prefix>-once` (the stream `KV_<prefix>-once`, one subject per topic and key), each entry
 * holding `seq:until`: the first publish's seq, and when its window ends (checked on read). The
 * publish itself carries the key as `Nats-Msg-Id`, so retries racing each other within the
 * topic stream's duplicate window (JetStream's, at most 2 minutes) land once, atomically, and
 * the bucket entry written after it answers the retries that come later in the window.
 * Bounded: the bucket holds at most `maxEntries` keys, the oldest dropped first, and none
 * longer than a day (its max age, MAX_IDEMPOTENCY_WINDOW_MS).
 */
import { createHash } from 'node:crypto';
import { DiscardPolicy, JetStreamApiError, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type { StreamConfig } from '@nats-io/jetstream';
import { MAX_IDEMPOTENCY_WINDOW_MS } from './broker.js';
import type { Link } from './nats-link.js';
import { isStreamNotFound } from './nats-streams.js';

/** Keys the bucket holds at most by default. */
export const DEFAULT_MAX_IDEMPOTENCY_KEYS = 1_000_000;
/** JetStream's "stream name already in use (with a different configuration)". */
const STREAM_NAME_IN_USE = 10058;

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
  /** The connection the bucket was last made sure of (a new one checks again). */
  private ensuredOn: Link | undefined;

  constructor(
    private readonly prefix: string,
    private readonly replicas: number,
    private readonly timeoutMs: number,
    private readonly maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The first publish's seq while the key's window holds; undefined otherwise. */
  async seen(link: Link, topic: string, key: string): Promise<number | undefined> {
    const names = natsOnceNames(this.prefix, topic, key);
    let last;
    try {
      last = await link.jsm.streams.getMessage(names.stream, { last_by_subj: names.subject });
    } catch (err) {
      if (isStreamNotFound(err)) return undefined; // no bucket yet: no key was ever held
      throw err;
    }
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
    await this.ensureBucket(link, names.stream, names.bucket);
    await link.js.publish(names.subject, `${seq}:${this.now() + windowMs}`, {
      timeout: this.timeoutMs,
    });
  }

  private async ensureBucket(link: Link, stream: string, bucket: string): Promise<void> {
    if (this.ensuredOn === link) return;
    const config: Partial<StreamConfig> & Pick<StreamConfig, 'name'> = {
      name: stream,
      subjects: [`$KV.${bucket}.>`],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      // Full: the oldest key goes (a retry of it after that would publish again).
      discard: DiscardPolicy.Old,
      max_msgs: this.maxEntries,
      max_msgs_per_subject: 1,
      max_age: MAX_IDEMPOTENCY_WINDOW_MS * 1e6,
      num_replicas: this.replicas,
      allow_rollup_hdrs: true,
      allow_direct: true,
      duplicate_window: 120_000_000_000,
    };
    try {
      await link.jsm.streams.add(config);
    } catch (err) {
      // Made by another node with other settings (its own bound): used as it is.
      if (!(err instanceof JetStreamApiError) || err.code !== STREAM_NAME_IN_USE) throw err;
    }
    this.ensuredOn = link;
  }
}

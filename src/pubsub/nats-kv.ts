/*
 * A key-value bucket over JetStream, in the layout of a NATS KV bucket (the stream
 * `KV_<bucket>`, one subject per key, `$KV.<bucket>.<key>`, one message kept per subject), so
 * the `nats kv` tools read it. The broker's buckets (the deny list, the idempotency keys,
 * presence) go through it: the bucket made when first written, a key's last value read
 * directly, a value written over exactly the one read (JetStream compares the subject's last
 * sequence), keys removed by purging their subjects, and the keys under a wildcard read
 * through a short-lived consumer. A bucket another node is making this moment is waited for
 * (see `awaitListening`) before it is written, read or purged.
 */
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import type { ConsumerConfig, StoredMsg, StreamConfig } from '@nats-io/jetstream';
import { noop } from './nats-link.js';
import type { Link } from './nats-link.js';
import { addStream, awaitListening, isStreamNotFound } from './nats-streams.js';

/** How a bucket is made (by the first node that writes to it; others use it as it is). */
export interface NatsKvOptions {
  /** The bucket's name: its stream is `KV_<bucket>`, its subjects `$KV.<bucket>.<key>`. */
  bucket: string;
  replicas: number;
  /** Keys held at most (-1: no bound). */
  maxEntries: number;
  /** When full: refuse a new key (`new`) or drop the oldest (`old`). */
  discard: 'new' | 'old';
  /** When JetStream drops a key for good, in ms (0: never). */
  maxAgeMs: number;
  /** `memory` for what the nodes write again after a NATS restart anyway. Default `file`. */
  storage?: 'file' | 'memory';
  /** Refuse deleting single messages (a key then goes only by age or by being written over). */
  denyDelete?: boolean;
}

/** A key's last value, as a scan reads it. */
export interface NatsKvEntry {
  /** The key (the subject after `$KV.<bucket>.`). */
  key: string;
  /** Its stream sequence: what a compare-and-swap of it expects, and a scan's position. */
  seq: number;
  value: string;
  /** When NATS stored it (the server's clock). */
  storedAt: number;
}

/** What a scan found: up to its `max` entries, how many matched in all, and NATS's clock. */
export interface NatsKvScan {
  entries: NatsKvEntry[];
  /** Keys matching the filter after `afterSeq` when the scan started (more than `entries` when cut at `max`). */
  matched: number;
  /** When the scan started, by the server's clock (ms): to compare with `storedAt`. */
  now: number;
}

/** JetStream's "stream name already in use (with a different configuration)". */
const STREAM_NAME_IN_USE = 10058;
/** The key a new bucket is probed on (see `awaitListening`); nothing is ever written to it. */
const PROBE_KEY = '_probe';
/** Messages a scan asks for at once. */
const SCAN_BATCH = 256;
/** How long a scan's consumer outlives a reader that died before deleting it. */
const SCAN_CONSUMER_IDLE_NS = 30_000_000_000;

export class NatsKvBucket {
  readonly stream: string;
  private readonly subjectPrefix: string;
  /** The connection the bucket was last made sure of (a new one checks again). */
  private ensuredOn: Link | undefined;
  /** The connection on which the bucket was last seen set up (made, or found and listening). */
  private setUpOn: Link | undefined;

  constructor(
    private readonly options: NatsKvOptions,
    private readonly timeoutMs: number,
  ) {
    this.stream = `KV_${options.bucket}`;
    this.subjectPrefix = `$KV.${options.bucket}.`;
  }

  /** The subject of `key` (or of a filter with `*` and `>`). */
  subject(key: string): string {
    return this.subjectPrefix + key;
  }

  /** Make the bucket unless this connection already did or saw it. */
  async ensure(link: Link): Promise<void> {
    if (this.ensuredOn === link) return;
    const { options } = this;
    const config: Partial<StreamConfig> & Pick<StreamConfig, 'name'> = {
      name: this.stream,
      subjects: [`${this.subjectPrefix}>`],
      retention: RetentionPolicy.Limits,
      storage: options.storage === 'memory' ? StorageType.Memory : StorageType.File,
      discard: options.discard === 'new' ? DiscardPolicy.New : DiscardPolicy.Old,
      max_msgs: options.maxEntries,
      max_msgs_per_subject: 1,
      max_age: options.maxAgeMs * 1e6,
      num_replicas: options.replicas,
      allow_rollup_hdrs: true,
      allow_direct: true,
      duplicate_window: 120_000_000_000,
      ...(options.denyDelete ? { deny_delete: true } : {}),
    };
    let stored: number | undefined;
    try {
      stored = (await addStream(link, config)).state.last_seq;
    } catch (err) {
      // Made by another node with other settings (its own bound): used as it is.
      if (!(err instanceof JetStreamApiError) || err.code !== STREAM_NAME_IN_USE) throw err;
    }
    // Nothing written yet (or not known): perhaps made by another node this moment, and not
    // listening yet; a write before it does would find nobody to take it.
    if (!stored) await awaitListening(link, this.subject(PROBE_KEY), this.timeoutMs);
    this.ensuredOn = link;
    this.setUpOn = link;
  }

  /** The bucket was found deleted: the next `ensure` makes it again. */
  forget(): void {
    this.ensuredOn = undefined;
    this.setUpOn = undefined;
  }

  /**
   * Whether the bucket exists (nothing is made), once it is set up. nats-server before 2.9.15
   * lists a new stream before its storage exists, and a message read, a purge or a consumer on
   * it then crashes the server: a bucket found empty (as one being made looks) is read only once
   * it listens. Known for the connection after the first time.
   */
  private async setUp(link: Link): Promise<boolean> {
    if (this.setUpOn === link) return true;
    let stored: number;
    try {
      stored = (await link.jsm.streams.info(this.stream)).state.last_seq;
    } catch (err) {
      if (isStreamNotFound(err)) return false;
      throw err;
    }
    if (stored === 0) await awaitListening(link, this.subject(PROBE_KEY), this.timeoutMs);
    this.setUpOn = link;
    return true;
  }

  /** Deleted behind our back (a read found no stream): made sure of again before the next use. */
  private gone(err: unknown): boolean {
    if (!isStreamNotFound(err)) return false;
    this.forget();
    return true;
  }

  /** The key's last value; null when it has none (or there is no bucket: reading makes none). */
  async last(link: Link, key: string): Promise<StoredMsg | null> {
    try {
      if (!(await this.setUp(link))) return null;
      return await link.jsm.streams.getMessage(this.stream, { last_by_subj: this.subject(key) });
    } catch (err) {
      if (this.gone(err)) return null;
      throw err;
    }
  }

  /**
   * Write `value` under `key`; with `expectSeq`, only over the value of that sequence (0: only
   * when the key has none), else JetStream refuses it (see {@link isWrongLastSequence}).
   * Resolves with the new value's sequence.
   */
  async put(link: Link, key: string, value: string, expectSeq?: number): Promise<number> {
    const ack = await link.js.publish(this.subject(key), value, {
      timeout: this.timeoutMs,
      ...(expectSeq !== undefined ? { expect: { lastSubjectSequence: expectSeq } } : {}),
    });
    return ack.seq;
  }

  /** Remove the keys matching `filter` (`*`, `>` allowed); how many went. No bucket: none. */
  async purge(link: Link, filter: string): Promise<number> {
    try {
      if (!(await this.setUp(link))) return 0;
      return (await link.jsm.streams.purge(this.stream, { filter: this.subject(filter) })).purged;
    } catch (err) {
      if (this.gone(err)) return 0;
      throw err;
    }
  }

  /**
   * Remove `key`'s value of sequence `seq` (and any older one), not one written after it; how
   * many went. No bucket: none.
   */
  async purgeUpTo(link: Link, key: string, seq: number): Promise<number> {
    try {
      if (!(await this.setUp(link))) return 0;
      const filter = this.subject(key);
      return (await link.jsm.streams.purge(this.stream, { filter, seq: seq + 1 })).purged;
    } catch (err) {
      if (this.gone(err)) return 0;
      throw err;
    }
  }

  /**
   * The keys matching `filter` written after `afterSeq`, in sequence order, at most `max` of
   * them, through a consumer made for this read and deleted after it. No bucket: none.
   */
  async scan(link: Link, filter: string, afterSeq = 0, max = Infinity): Promise<NatsKvScan> {
    const config: Partial<ConsumerConfig> = {
      filter_subject: this.subject(filter),
      ack_policy: AckPolicy.None,
      mem_storage: true,
      num_replicas: 1,
      inactive_threshold: SCAN_CONSUMER_IDLE_NS,
      ...(afterSeq > 0
        ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: afterSeq + 1 }
        : { deliver_policy: DeliverPolicy.All }),
    };
    let info;
    try {
      if (!(await this.setUp(link))) return { entries: [], matched: 0, now: Date.now() };
      info = await link.jsm.consumers.add(this.stream, config);
    } catch (err) {
      if (this.gone(err)) return { entries: [], matched: 0, now: Date.now() };
      throw err;
    }
    const scan: NatsKvScan = {
      entries: [],
      matched: info.num_pending,
      now: Date.parse(info.created),
    };
    try {
      const want = Math.min(max, info.num_pending);
      const consumer = link.js.consumers.getConsumerFromInfo(info);
      while (scan.entries.length < want) {
        const batch = await consumer.fetch({
          max_messages: Math.min(SCAN_BATCH, want - scan.entries.length),
          // Keys purged since the scan started make a batch come back short: it ends here.
          expires: Math.min(1_000, this.timeoutMs),
        });
        let received = 0;
        for await (const m of batch) {
          received++;
          scan.entries.push({
            key: m.subject.slice(this.subjectPrefix.length),
            seq: m.seq,
            value: m.string(),
            storedAt: m.time.getTime(),
          });
        }
        if (received === 0) break;
      }
    } finally {
      link.jsm.consumers.delete(this.stream, info.name).catch(noop);
    }
    return scan;
  }
}

/** JetStream refused a write whose `expectSeq` was not the key's last sequence any more. */
export function isWrongLastSequence(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence;
}

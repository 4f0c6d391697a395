/*
 * Topic streams on JetStream: their configuration from a topic's retention, creating them or
 * bringing them to new limits, and remembering which this node has already set up so that a
 * publish costs no stream round trip in the common case.
 */
import {
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import type { StreamConfig, StreamInfo } from '@nats-io/jetstream';
import { defaultRetention } from './broker.js';
import type { Retention } from './broker.js';
import type { Link } from './nats-link.js';
import { natsTopicNames } from './nats-names.js';

/** What the broker sets on a topic's stream; JetStream defaults the rest. */
type TopicStreamConfig = Partial<StreamConfig> &
  Pick<StreamConfig, 'name' | 'max_msgs' | 'max_age' | 'discard' | 'duplicate_window'>;

const DEFAULT_DUPLICATE_WINDOW = 120_000_000_000;

/** JetStream's "stream name already in use (with a different configuration)". */
const STREAM_NAME_IN_USE = 10058;

export function isStreamNotFound(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound;
}

/** A JetStream publish nobody answered: no stream listens on the subject. */
export function isNoResponders(err: unknown): boolean {
  return err instanceof Error && /no responders|not enabled/i.test(err.message);
}

/** Stream max_age in nanoseconds: at least 100 ms; 0 (no limit) when not finite. */
function maxAgeNanos(maxAgeMs: number): number {
  if (!Number.isFinite(maxAgeMs)) return 0;
  return Math.min(Math.round(Math.max(100, maxAgeMs) * 1e6), Number.MAX_SAFE_INTEGER);
}

export class NatsStreams {
  /** Topics whose stream this node created or updated, with the limits it applied. */
  private readonly ensured = new Map<string, string>();
  /** Stream set-ups in flight, by topic and limits: concurrent publishes wait on one. */
  private readonly ensuring = new Map<string, Promise<void>>();

  /** `prefix` names the streams; `replicas` is set on every stream created. */
  constructor(
    private readonly prefix: string,
    private readonly replicas: number,
  ) {}

  /** The stream is gone (deleted behind our back): set it up again on the next publish. */
  forget(topic: string): void {
    this.ensured.delete(topic);
  }

  /** A new connection: the server may have lost any stream, so check them all again. */
  forgetAll(): void {
    this.ensured.clear();
  }

  private streamConfig(topic: string, retention: Retention): TopicStreamConfig {
    const { stream, subject } = natsTopicNames(this.prefix, topic);
    const maxAge = maxAgeNanos(retention.maxAgeMs);
    return {
      name: stream,
      subjects: [subject],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      discard: DiscardPolicy.Old,
      num_replicas: this.replicas,
      max_msgs: Number.isFinite(retention.maxLength)
        ? Math.max(1, Math.floor(retention.maxLength))
        : -1,
      max_age: maxAge,
      // JetStream's default (2 min) may not exceed max_age: set it so updates stay valid.
      duplicate_window:
        maxAge > 0 ? Math.min(maxAge, DEFAULT_DUPLICATE_WINDOW) : DEFAULT_DUPLICATE_WINDOW,
    };
  }

  /**
   * Make sure the topic's stream exists with `retention` (created, or an existing one brought
   * to it). Concurrent callers for one topic share
   * one attempt: publishes made in one turn then reach `js.publish` in the order they were
   * made, so the stream numbers them in publish order (separate attempts finishing in any
   * order would reorder the first burst on a new topic).
   */
  ensureStream(link: Link, topic: string, retention: Retention): Promise<void> {
    const config = this.streamConfig(topic, retention);
    const limits = `${config.max_msgs}/${config.max_age}`;
    if (this.ensured.get(topic) === limits) return Promise.resolve();
    const key = `${topic}\u0000${limits}`;
    let pending = this.ensuring.get(key);
    if (!pending) {
      // `ensured` is set in the very reaction that settles `pending`, so every caller already
      // waiting continues before any later caller that finds the stream ensured.
      pending = this.addOrUpdateStream(link, config).then(
        () => {
          this.ensuring.delete(key);
          this.ensured.set(topic, limits);
        },
        (err: unknown) => {
          this.ensuring.delete(key);
          throw err;
        },
      );
      this.ensuring.set(key, pending);
    }
    return pending;
  }

  private async addOrUpdateStream(link: Link, config: TopicStreamConfig): Promise<void> {
    try {
      // Idempotent: a node racing us with the same configuration gets the same stream.
      await link.jsm.streams.add(config);
    } catch (err) {
      if (!(err instanceof JetStreamApiError) || err.code !== STREAM_NAME_IN_USE) throw err;
      await link.jsm.streams.update(config.name, {
        max_msgs: config.max_msgs,
        max_age: config.max_age,
        duplicate_window: config.duplicate_window,
        discard: config.discard,
      });
    }
  }

  /** The topic's stream, created with the default retention if nobody published yet. */
  async streamInfoOrCreate(link: Link, topic: string): Promise<StreamInfo> {
    const { stream } = natsTopicNames(this.prefix, topic);
    try {
      return await link.jsm.streams.info(stream);
    } catch (err) {
      if (!isStreamNotFound(err)) throw err;
    }
    try {
      return await link.jsm.streams.add(this.streamConfig(topic, defaultRetention));
    } catch (err) {
      // Someone created it first, with other limits: theirs stand.
      if (!(err instanceof JetStreamApiError) || err.code !== STREAM_NAME_IN_USE) throw err;
      return link.jsm.streams.info(stream);
    }
  }
}

/*
 * Topic streams on JetStream: their configuration from a topic's retention, creating them (at
 * a topic's first publish, within the node's budget of new topics) or bringing them to new
 * limits, remembering which this node has already set up so that a publish costs no stream
 * round trip in the common case, and deleting the ones nobody uses any more without losing a
 * message one of them took meanwhile (see `deleteIfIdle`). Also what every
 * stream the broker makes (topic streams, key-value buckets) needs when several nodes make it
 * at the same moment: `addStream` and `awaitListening`.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import type { StreamConfig, StreamInfo } from '@nats-io/jetstream';
import { TopicCreationLimitError } from './broker.js';
import type { Retention } from './broker.js';
import type { CreationBudget } from './creation-budget.js';
import { NatsBrokerUnavailableError } from './nats-link.js';
import type { Link } from './nats-link.js';
import { natsStreamPrefix, natsTopicNames } from './nats-names.js';

/** What the broker sets on a topic's stream; JetStream defaults the rest. */
type TopicStreamConfig = Partial<StreamConfig> &
  Pick<StreamConfig, 'name' | 'max_msgs' | 'max_age' | 'discard' | 'duplicate_window'>;

const DEFAULT_DUPLICATE_WINDOW = 120_000_000_000;

/** JetStream's "stream name already in use (with a different configuration)". */
const STREAM_NAME_IN_USE = 10058;
/** JetStream's "subjects overlap with an existing stream". */
const SUBJECTS_OVERLAP = 10065;
/** A stream sequence no stream reaches: a publish expecting it as the last one is refused. */
const UNREACHED_SEQ = Number.MAX_SAFE_INTEGER;
/** First and longest wait between probes of a stream that does not listen yet, in ms. */
const PROBE_FIRST_WAIT_MS = 5;
const PROBE_MAX_WAIT_MS = 100;

export function isStreamNotFound(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound;
}

/** A JetStream publish nobody answered: no stream listens on the subject. */
export function isNoResponders(err: unknown): boolean {
  return err instanceof Error && /no responders|not enabled/i.test(err.message);
}

/**
 * Add a stream, or get the one of that name if its configuration is the same (JetStream refuses
 * another with "name already in use"). Two adds of one stream at the same moment (two nodes
 * making a topic's stream or a bucket) may have one refused with "subjects overlap with an
 * existing stream": nats-server (2.9 at least) looks for the name and for overlapping subjects
 * at separate moments, and the other add registers the stream in between. It is registered by then,
 * so adding once more answers as any later add would.
 */
export async function addStream(
  link: Link,
  config: Partial<StreamConfig> & Pick<StreamConfig, 'name'>,
): Promise<StreamInfo> {
  try {
    return await link.jsm.streams.add(config);
  } catch (err) {
    if (!(err instanceof JetStreamApiError) || err.code !== SUBJECTS_OVERLAP) throw err;
    return link.jsm.streams.add(config);
  }
}

/**
 * Resolve once a stream takes messages on `subject`. nats-server before 2.9.15 registers a new
 * stream, and answers any add racing its creation with it, before it subscribes to its subjects:
 * a publish right after such an add finds nobody listening ("no responders"). The probe is a
 * publish that expects a last sequence no stream reaches, so it stores nothing: refused by
 * the stream once it listens; before that, no responders, and probed again shortly after.
 * Gives up with that error after `timeoutMs` (a stream deleted meanwhile never answers).
 */
export async function awaitListening(
  link: Link,
  subject: string,
  timeoutMs: number,
): Promise<void> {
  const giveUpAt = Date.now() + timeoutMs;
  for (let wait = PROBE_FIRST_WAIT_MS; ; wait = Math.min(2 * wait, PROBE_MAX_WAIT_MS)) {
    try {
      await link.js.publish(subject, undefined, {
        timeout: timeoutMs,
        expect: { lastSequence: UNREACHED_SEQ },
      });
      return;
    } catch (err) {
      // The stream answered (refusing the expected sequence): it listens.
      if (err instanceof JetStreamApiError) return;
      if (!isNoResponders(err) || Date.now() + wait >= giveUpAt) throw err;
    }
    await sleep(wait);
  }
}

/** Stream max_age in nanoseconds: at least 100 ms; 0 (no limit) when not finite. */
function maxAgeNanos(maxAgeMs: number): number {
  if (!Number.isFinite(maxAgeMs)) return 0;
  return Math.min(Math.round(Math.max(100, maxAgeMs) * 1e6), Number.MAX_SAFE_INTEGER);
}

/** Topics remembered as set up; beyond it the memory is cleared (it only saves round trips). */
const MAX_ENSURED = 10_000;

export class NatsStreams {
  /** Topics whose stream this node created or updated, with the limits it applied. */
  private readonly ensured = new Map<string, string>();
  /** Stream set-ups in flight, by topic and limits: concurrent publishes wait on one. */
  private readonly ensuring = new Map<string, Promise<void>>();

  /**
   * `prefix` names the streams; `replicas` and `storage` are set on every stream created;
   * `budget` bounds how many this node creates per second; `timeoutMs` bounds waiting for a new
   * stream to listen.
   */
  constructor(
    private readonly prefix: string,
    private readonly replicas: number,
    private readonly budget: CreationBudget,
    private readonly timeoutMs: number,
    private readonly storage: StorageType = StorageType.File,
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
      storage: this.storage,
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
      pending = this.addOrUpdateStream(link, topic, config).then(
        () => {
          this.ensuring.delete(key);
          if (this.ensured.size >= MAX_ENSURED) this.ensured.clear();
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

  private async addOrUpdateStream(
    link: Link,
    topic: string,
    config: TopicStreamConfig,
  ): Promise<void> {
    let found = await this.addOrFind(link, topic, config);
    if (found.info && isParked(found.info, config.subjects![0]!)) {
      // Being deleted as idle (see deleteIfIdle), or left so by a node that stopped half-way:
      // it takes no publish until settled. Settled here (deleted if idle, else taking
      // publishes again), then looked for or made once more.
      await this.settle(link, topic, config.name, config.subjects![0]!);
      found = await this.addOrFind(link, topic, config);
      if (found.info && isParked(found.info, config.subjects![0]!)) {
        throw new NatsBrokerUnavailableError(
          `NATS broker: the stream of "${topic}" is being deleted as idle; publish again`,
        );
      }
    }
    let info = found.info;
    // An update writes back every setting it read, the subjects included: one racing a settler
    // that parks the stream to delete it as idle would take it out of the parking, and a publish
    // then stored would go with the stream. Made only when a limit differs.
    if (!found.added && !sameLimits(info, config)) {
      info = await link.jsm.streams.update(config.name, {
        max_msgs: config.max_msgs,
        max_age: config.max_age,
        duplicate_window: config.duplicate_window,
        discard: config.discard,
      });
    }
    // Nothing stored yet: perhaps another node's creation, not listening yet. Waited for here,
    // so that a first burst of publishes still reaches the stream in the order it was made.
    if (info!.state.last_seq === 0) {
      await awaitListening(link, natsTopicNames(this.prefix, topic).subject, this.timeoutMs);
    }
  }

  /**
   * The topic's stream as made now with `config` (`added`: nothing more to set), or as found
   * (`info`, undefined when it is gone meanwhile: then updating it fails, as a publish to it
   * would). Within the budget of new streams; beyond it only a stream that exists is found.
   */
  private async addOrFind(
    link: Link,
    topic: string,
    config: TopicStreamConfig,
  ): Promise<{ info: StreamInfo | undefined; added: boolean }> {
    if (!this.budget.available()) {
      // No new stream now: only one that exists already may be published to.
      const info = await this.streamInfo(link, topic);
      if (!info) throw new TopicCreationLimitError(topic, this.budget.perSecond);
      return { info, added: false };
    }
    try {
      // Idempotent: a node racing us with the same configuration gets the same stream.
      const info = await addStream(link, config);
      // Nothing ever stored: made now (or by a node racing us), so it counts as new.
      if (info.state.last_seq === 0) this.budget.spend();
      return { info, added: true };
    } catch (err) {
      if (!(err instanceof JetStreamApiError) || err.code !== STREAM_NAME_IN_USE) throw err;
      // Made with other limits (perhaps by another node this moment), or parked: brought to
      // them once set up.
      return { info: await this.streamInfo(link, topic), added: false };
    }
  }

  /**
   * The topic's stream, or undefined when it has none (nobody published to it): none is made.
   * One with nothing stored, as one another node is making this moment looks, is answered once
   * it listens: nats-server before 2.9.15 lists a new stream before its storage exists, and a
   * consumer, a read or a change of it then crashes the server.
   */
  async streamInfo(link: Link, topic: string): Promise<StreamInfo | undefined> {
    const { stream, subject } = natsTopicNames(this.prefix, topic);
    let info: StreamInfo;
    try {
      info = await link.jsm.streams.info(stream);
    } catch (err) {
      if (isStreamNotFound(err)) return undefined;
      throw err;
    }
    // A parked stream (see settle) listens elsewhere, and was set up to be changed.
    if (info.state.last_seq === 0 && !isParked(info, subject)) {
      await awaitListening(link, subject, this.timeoutMs);
    }
    return info;
  }

  /**
   * Delete the topic's stream if it is idle: no message retained (its last one is older than
   * its `max_age`, or none was ever stored) and no consumer on it, from any node. Its
   * numbering ends there: a later publish makes a new stream, with a new epoch, from seq 1.
   * True when it was deleted. A stream found parked (see `settle`) is settled.
   */
  async deleteIfIdle(link: Link, topic: string): Promise<boolean> {
    const { stream, subject } = natsTopicNames(this.prefix, topic);
    const info = await this.streamInfo(link, topic);
    if (!info || (!isIdle(info) && !isParked(info, subject))) return false;
    return this.settle(link, topic, stream, subject);
  }

  /**
   * Delete every idle stream of this prefix (see `deleteIfIdle`), on any node's behalf: those
   * left behind when their last subscriber was on a node that is gone, or whose messages
   * expired after it left; and settle any left parked by a node that stopped half-way. Only
   * streams whose name and subject are exactly this prefix's are touched (another prefix that
   * starts with this one has other subjects). Returns how many were deleted.
   */
  async sweepIdle(link: Link): Promise<number> {
    const streamPrefix = natsStreamPrefix(this.prefix);
    let deleted = 0;
    // `>`: a parked stream's subject has more tokens than a topic's.
    for await (const info of link.jsm.streams.list(`${this.prefix}.>`)) {
      const name = info.config.name;
      if (!name.startsWith(streamPrefix)) continue;
      const subject = `${this.prefix}.${name.slice(streamPrefix.length)}`;
      const subjects = info.config.subjects ?? [];
      if (subjects.length !== 1) continue;
      const parked = isParked(info, subject);
      if (!parked && (subjects[0] !== subject || !isIdle(info))) continue;
      // Perhaps another node's creation this moment: changed only once it listens (see
      // streamInfo); one deleted meanwhile is passed over.
      if (!parked && info.state.last_seq === 0) {
        const listening = await awaitListening(link, subject, this.timeoutMs).then(
          () => true,
          () => false,
        );
        if (!listening) continue;
      }
      if (await this.settle(link, undefined, name, subject)) deleted++;
    }
    return deleted;
  }

  /**
   * Delete the stream if it is idle, so that no publish it took is lost with it. JetStream
   * deletes a stream by name, whatever it holds, so a publish stored between a look that found
   * it idle and the delete would have been acknowledged (the publisher told its seq) and then
   * deleted. So the stream is first parked: its subject moved to one of this call's own, where
   * nobody publishes, so that from then on a publish to the topic finds no stream and stores
   * nothing (the publishing node settles the stream itself, then publishes: see
   * addOrUpdateStream). A probe on the parked subject, refused by the stream after every
   * message it was given before (a stream takes its messages in order), is the fence: the look
   * after it sees all a publish stored, and the stream is deleted only if it still holds
   * nothing and has no consumer, and is still parked by this call; otherwise it takes its
   * subject back. True when it was deleted.
   *
   * Any node may settle a parked stream (one whose node stopped half-way is never left so):
   * settling again parks it anew under its own subject, and whoever parked it before finds the
   * subject not its own and leaves it. The delete itself stays a request by name: a node that
   * stalls between its last look and its delete for as long as another node takes to settle,
   * delete, make and publish to the stream anew would delete the new one; such a stream is
   * then lost as a topic the broker lost (a new epoch, a gap signal to its subscribers).
   */
  private async settle(
    link: Link,
    topic: string | undefined,
    stream: string,
    subject: string,
  ): Promise<boolean> {
    const parked = `${subject}${PARKED_MARK}${randomBytes(8).toString('hex')}`;
    try {
      await link.jsm.streams.update(stream, { subjects: [parked] });
    } catch (err) {
      if (isStreamNotFound(err)) return false;
      throw err;
    }
    try {
      await link.js.publish(parked, undefined, {
        timeout: this.timeoutMs,
        expect: { lastSequence: UNREACHED_SEQ },
      });
    } catch (err) {
      // Nobody listens on it: parked anew by another node, or deleted. Theirs to settle.
      if (isNoResponders(err)) return false;
      // The stream refused it, after everything it was given before: the fence.
      if (!(err instanceof JetStreamApiError)) throw err;
    }
    let info: StreamInfo;
    try {
      info = await link.jsm.streams.info(stream);
    } catch (err) {
      if (isStreamNotFound(err)) return false;
      throw err;
    }
    const subjects = info.config.subjects ?? [];
    if (subjects.length !== 1 || subjects[0] !== parked) return false;
    if (isIdle(info)) return this.delete(link, topic, stream);
    // It holds a message (taken before it was parked) or is consumed: kept, taking publishes.
    await link.jsm.streams.update(stream, { subjects: [subject] });
    return false;
  }

  private async delete(link: Link, topic: string | undefined, stream: string): Promise<boolean> {
    try {
      await link.jsm.streams.delete(stream);
    } catch (err) {
      if (isStreamNotFound(err)) return false;
      throw err;
    }
    // A node that still takes the stream for set up finds it gone at its next publish (no
    // responders: nobody listens on the subject) and makes it again.
    if (topic !== undefined) this.ensured.delete(topic);
    return true;
  }
}

/** What follows a topic's subject in a parked stream's subject (then a random part). */
const PARKED_MARK = '.idle.';

/** The stream has its topic subject `subject` parked (see NatsStreams.settle). */
function isParked(info: StreamInfo, subject: string): boolean {
  const subjects = info.config.subjects ?? [];
  return subjects.length === 1 && subjects[0]!.startsWith(`${subject}${PARKED_MARK}`);
}

function isIdle(info: StreamInfo): boolean {
  return info.state.messages === 0 && info.state.consumer_count === 0;
}

/** Whether the stream found (`info`) already has the limits `config` asks for. */
function sameLimits(info: StreamInfo | undefined, config: TopicStreamConfig): boolean {
  if (!info) return false;
  const now = info.config;
  return (
    now.max_msgs === config.max_msgs &&
    now.max_age === config.max_age &&
    now.duplicate_window === config.duplicate_window &&
    now.discard === config.discard
  );
}

import { nanoid } from 'nanoid';
import { defaultRetention, pageLimit } from './broker.js';
import type { Broker, BrokerMessage, History, OnceResult, Retention } from './broker.js';
import { MemoryDenyList } from './deny-list.js';
import type { Denial } from './deny-list.js';
import { OnceKeys } from './once-keys.js';
import { MemoryPresenceStore } from './presence.js';
import { MemorySessionDenyList } from './session-deny-list.js';
import type { SessionDenial } from './session-deny-list.js';

/** {@link MemoryBrokerOptions.maxTopicHistoryChars} by default: 64 Mi characters. */
export const DEFAULT_MAX_TOPIC_HISTORY_CHARS = 64 * 1024 * 1024;
/** {@link MemoryBrokerOptions.maxHistoryChars} by default: 256 Mi characters. */
export const DEFAULT_MAX_HISTORY_CHARS = 256 * 1024 * 1024;

/** Options of {@link MemoryBroker}. */
export interface MemoryBrokerOptions {
  /** The clock history ages are measured with. Default `Date.now`. */
  now?: () => number;
  /**
   * Topic logs kept for topics nobody here subscribes to (their history, for clients that
   * resume). Beyond this many, the least recently published ones are dropped. Default 10 000.
   */
  maxIdleTopics?: number;
  /**
   * Characters of payload one topic's log keeps at most (the history lives in this process's
   * heap): beyond it the oldest messages are dropped, as beyond the topic's `maxLength`; the
   * latest is kept whatever its size. Default 64 Mi (DEFAULT_MAX_TOPIC_HISTORY_CHARS).
   */
  maxTopicHistoryChars?: number;
  /**
   * Characters of payload every log together keeps at most: beyond it the least recently
   * published topics give up their oldest messages first (a subscribed topic keeps its
   * numbering), never the message being published. Default 256 Mi (DEFAULT_MAX_HISTORY_CHARS).
   */
  maxHistoryChars?: number;
  /** How often, at most, a publish looks for expired idle logs. Default 60 000 ms. */
  sweepIntervalMs?: number;
  /**
   * Users the deny list (revokeUser) holds at most; a revocation beyond it, with none lapsed,
   * is refused. Default 100 000.
   */
  maxDeniedUsers?: number;
  /**
   * Revoked sessions (revokeSession of another node's session) kept at most, every node's
   * together; a revocation beyond it, with none lapsed, is refused. Default 100 000.
   */
  maxDeniedSessions?: number;
  /**
   * Idempotency keys (publishOnce) remembered at most; beyond it the oldest is forgotten first.
   * Default 100 000.
   */
  maxIdempotencyKeys?: number;
}

interface TopicLog {
  lastSeq: number;
  retention: Retention;
  /** Retained messages, oldest first, with when they were published. */
  messages: { message: BrokerMessage; at: number }[];
  /** The characters of the retained messages' payloads. */
  chars: number;
  /** Names this log's numbering: a log dropped and made again starts a new one. */
  epoch: string;
  /** Last publish (or creation), for dropping the least recently used idle logs first. */
  touched: number;
}

/**
 * The embedded broker: one process, no network. Delivery is synchronous, so
 * a publish reaches every subscriber before `publish` returns, in order. Each
 * topic keeps a bounded history (length and age) for clients that resume.
 *
 * Every topic log has an epoch, random per broker instance (and new for a log made again
 * after it was dropped), so a client resuming with a position from another gateway process
 * (numbered from 1 again) is told, rather than handed the new numbering's later messages.
 *
 * Memory: a log is kept while its topic is subscribed here; an idle one (no subscriber) is
 * dropped once all its messages have expired (checked on publish, at most every
 * `sweepIntervalMs`), and at most `maxIdleTopics` idle logs are kept (least recently published
 * dropped first), so distinct topic names published once do not accumulate. What the logs keep
 * is bounded in characters too, each (`maxTopicHistoryChars`) and all together
 * (`maxHistoryChars`): the count bound alone would let a topic keep `maxLength` messages of any
 * size, and a broadcast to many topics a copy for each.
 */
export class MemoryBroker implements Broker {
  /** Only this process publishes to it, through a gateway (whose publish writes JSON). */
  readonly trustedPayloads: boolean = true;
  private readonly listeners = new Map<string, (message: BrokerMessage) => void>();
  /** Subscribed topics that are not `$`-topics: the ones that may have a log. */
  private subscribedTopics = 0;
  /** By when each was last published, least recently first (a publish moves its log last). */
  private readonly logs = new Map<string, TopicLog>();
  private readonly maxTopicHistoryChars: number;
  private readonly maxHistoryChars: number;
  /** The characters every log keeps, together. */
  private historyChars = 0;
  private readonly now: () => number;
  private readonly maxIdleTopics: number;
  private readonly sweepIntervalMs: number;
  private readonly epochPrefix = nanoid(10);
  /** Revoked users (gateway.revokeUser). */
  private readonly denyList: MemoryDenyList;
  /** Revoked sessions, per node (gateway.revokeSession). */
  private readonly sessionDenyList: MemorySessionDenyList;
  /** Idempotency keys of publishOnce, with the seq of their first publish. */
  private readonly onceKeys: OnceKeys;
  /** Topics' members (presence), in process. */
  readonly presence: MemoryPresenceStore;
  private logsMade = 0;
  private nextSweepAt: number;
  private closed = false;

  constructor(options: MemoryBrokerOptions | (() => number) = {}) {
    const settings = typeof options === 'function' ? { now: options } : options;
    this.now = settings.now ?? Date.now;
    this.maxIdleTopics = Math.max(0, settings.maxIdleTopics ?? 10_000);
    this.maxTopicHistoryChars = Math.max(
      0,
      settings.maxTopicHistoryChars ?? DEFAULT_MAX_TOPIC_HISTORY_CHARS,
    );
    this.maxHistoryChars = Math.max(0, settings.maxHistoryChars ?? DEFAULT_MAX_HISTORY_CHARS);
    this.sweepIntervalMs = settings.sweepIntervalMs ?? 60_000;
    this.nextSweepAt = this.now() + this.sweepIntervalMs;
    this.denyList = new MemoryDenyList(this.now, settings.maxDeniedUsers);
    this.sessionDenyList = new MemorySessionDenyList(this.now, settings.maxDeniedSessions);
    this.presence = new MemoryPresenceStore(this.now);
    this.onceKeys = new OnceKeys(this.now, Math.max(1, settings.maxIdempotencyKeys ?? 100_000));
  }

  get ready(): boolean {
    return !this.closed;
  }

  /** Topic logs held (subscribed topics, and idle ones kept for resuming clients). */
  get retainedTopics(): number {
    return this.logs.size;
  }

  /** Characters of payload the logs keep, together (within `maxHistoryChars`). */
  get retainedHistoryChars(): number {
    return this.historyChars;
  }

  publish(
    topic: string,
    payload: string,
    retention: Retention = defaultRetention,
    except?: readonly string[],
  ): Promise<number> {
    if (this.closed) return Promise.reject(new Error('Broker closed'));
    return Promise.resolve(this.store(topic, payload, retention, except));
  }

  publishOnce(
    topic: string,
    payload: string,
    key: string,
    windowMs: number,
    retention: Retention = defaultRetention,
  ): Promise<OnceResult> {
    if (this.closed) return Promise.reject(new Error('Broker closed'));
    if (topic.startsWith('$')) {
      return Promise.reject(new TypeError('publishOnce takes no $-topic: they keep nothing'));
    }
    const seen = this.onceKeys.seen(topic, key);
    if (seen !== undefined) return Promise.resolve({ seq: seen, duplicate: true });
    // From the check to here in one turn: no other publish with the key comes between.
    const seq = this.store(topic, payload, retention);
    this.onceKeys.remember(topic, key, seq, windowMs);
    return Promise.resolve({ seq, duplicate: false });
  }

  /** Publish now: the message's seq (0 for a `$`-topic). */
  private store(
    topic: string,
    payload: string,
    retention: Retention,
    except?: readonly string[],
  ): number {
    if (topic.startsWith('$')) {
      // Addressed to a node or user (SessionRouter): delivered now or never, so no log is kept
      // (one per user name ever notified would grow without bound).
      this.listeners.get(topic)?.({ topic, seq: 0, payload });
      return 0;
    }
    const now = this.now();
    let log = this.logs.get(topic);
    if (log) {
      // Last in the map: the logs stay ordered from the least recently published.
      this.logs.delete(topic);
      this.logs.set(topic, log);
    } else {
      log = this.newLog(topic, retention, now);
    }
    log.retention = retention;
    log.touched = now;
    const plain: BrokerMessage = { topic, seq: ++log.lastSeq, payload, epoch: log.epoch };
    // History keeps whom it leaves out, as Redis and NATS do: a session named in it that resumes
    // (its replay under way) passes it by there too.
    const message = except ? { ...plain, except } : plain;
    if (retention.maxLength > 0) {
      const chars = storedChars(message);
      log.messages.push({ message, at: now });
      log.chars += chars;
      this.historyChars += chars;
    }
    this.trim(log, retention, now);
    if (this.historyChars > this.maxHistoryChars) this.evict(log);
    this.listeners.get(topic)?.(message);
    this.maybeSweep(now);
    return message.seq;
  }

  subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void> {
    if (!this.listeners.has(topic) && !topic.startsWith('$')) this.subscribedTopics++;
    this.listeners.set(topic, deliver);
    return Promise.resolve();
  }

  unsubscribe(topic: string): Promise<void> {
    if (this.listeners.delete(topic) && !topic.startsWith('$')) this.subscribedTopics--;
    return Promise.resolve();
  }

  history(topic: string, afterSeq: number, limit?: number): Promise<History> {
    const log = this.logs.get(topic);
    if (!log) return Promise.resolve({ messages: [], lastSeq: 0 });
    this.trimByAge(log, log.retention.maxAgeMs, this.now());
    // Seqs in the log are consecutive: the first one after `afterSeq` is found by arithmetic.
    const first = log.messages[0]?.message.seq ?? log.lastSeq + 1;
    const start = Math.max(0, Math.min(log.messages.length, Math.floor(afterSeq) + 1 - first));
    const count = pageLimit(limit) ?? log.messages.length;
    const messages = log.messages.slice(start, start + count).map((m) => m.message);
    return Promise.resolve({ messages, lastSeq: log.lastSeq, epoch: log.epoch });
  }

  close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    this.subscribedTopics = 0;
    this.logs.clear();
    this.historyChars = 0;
    this.denyList.clear();
    this.sessionDenyList.clear();
    this.onceKeys.clear();
    return Promise.resolve();
  }

  deny(user: string, revokedAt: number, forMs: number): Promise<void> {
    if (this.closed) return Promise.reject(new Error('Broker closed'));
    // Through a promise, so a full list rejects rather than throws.
    return Promise.resolve().then(() => this.denyList.deny(user, revokedAt, forMs));
  }

  denied(user: string): Promise<Denial | undefined> {
    if (this.closed) return Promise.reject(new Error('Broker closed'));
    return Promise.resolve(this.denyList.denied(user));
  }

  denySession(
    node: string,
    session: string,
    revokedAt: number,
    forMs: number,
    reason: string,
  ): Promise<void> {
    if (this.closed) return Promise.reject(new Error('Broker closed'));
    // Through a promise, so a full list rejects rather than throws.
    return Promise.resolve().then(() =>
      this.sessionDenyList.deny(node, session, revokedAt, forMs, reason),
    );
  }

  deniedSessions(node: string): Promise<SessionDenial[]> {
    if (this.closed) return Promise.reject(new Error('Broker closed'));
    return Promise.resolve(this.sessionDenyList.denied(node));
  }

  private newLog(topic: string, retention: Retention, now: number): TopicLog {
    const log: TopicLog = {
      lastSeq: 0,
      retention,
      messages: [],
      chars: 0,
      epoch: `${this.epochPrefix}.${(++this.logsMade).toString(36)}`,
      touched: now,
    };
    this.logs.set(topic, log);
    return log;
  }

  /**
   * Sweep idle logs when it is time to, or when there are more of them than allowed (logs
   * beyond the subscribed topics': `$`-topics, subscribed as they may be, have none).
   */
  private maybeSweep(now: number): void {
    if (now >= this.nextSweepAt || this.logs.size > this.subscribedTopics + this.maxIdleTopics) {
      this.sweep(now);
    }
  }

  private sweep(now: number): void {
    this.nextSweepAt = now + this.sweepIntervalMs;
    const idle: [string, TopicLog][] = [];
    for (const [topic, log] of this.logs) {
      if (this.listeners.has(topic)) continue;
      this.trimByAge(log, log.retention.maxAgeMs, now);
      if (log.messages.length === 0) this.logs.delete(topic);
      else idle.push([topic, log]);
    }
    if (idle.length <= this.maxIdleTopics) return;
    // Down to 90 % of the bound, so a stream of new topics sweeps once per many of them.
    const keep = Math.floor(this.maxIdleTopics * 0.9);
    idle.sort((a, b) => a[1].touched - b[1].touched);
    for (const [topic] of idle.slice(0, idle.length - keep)) this.dropLog(topic);
  }

  private dropLog(topic: string): void {
    const log = this.logs.get(topic);
    if (!log) return;
    this.historyChars -= log.chars;
    this.logs.delete(topic);
  }

  /**
   * Every log together past `maxHistoryChars`: the least recently published give up their
   * oldest messages until the total is within it. One emptied is dropped when idle (as a sweep
   * drops an expired one), else moved last (it keeps its numbering, and has nothing more to
   * give), so the next eviction does not walk it again. `current`, the log just published to,
   * goes last, down to its latest message.
   */
  private evict(current: TopicLog): void {
    for (const [topic, log] of this.logs) {
      if (this.historyChars <= this.maxHistoryChars || log === current) break;
      const over = this.historyChars - this.maxHistoryChars;
      this.dropOldest(log, countOver(log, over, 0));
      if (log.messages.length > 0) continue;
      if (this.listeners.has(topic)) {
        this.logs.delete(topic);
        this.logs.set(topic, log);
      } else {
        this.logs.delete(topic);
      }
    }
    if (this.historyChars > this.maxHistoryChars) {
      this.dropOldest(current, countOver(current, this.historyChars - this.maxHistoryChars, 1));
    }
  }

  private trim(log: TopicLog, retention: Retention, now: number): void {
    const excess = log.messages.length - retention.maxLength;
    if (excess > 0) this.dropOldest(log, excess);
    if (log.chars > this.maxTopicHistoryChars) {
      this.dropOldest(log, countOver(log, log.chars - this.maxTopicHistoryChars, 1));
    }
    this.trimByAge(log, retention.maxAgeMs, now);
  }

  private trimByAge(log: TopicLog, maxAgeMs: number, now: number): void {
    const oldest = now - maxAgeMs;
    let drop = 0;
    while (drop < log.messages.length && log.messages[drop]!.at < oldest) drop++;
    if (drop > 0) this.dropOldest(log, drop);
  }

  /** Drop the `count` oldest messages of `log`, and their characters from the counts. */
  private dropOldest(log: TopicLog, count: number): void {
    if (count <= 0) return;
    let chars = 0;
    for (const { message } of log.messages.splice(0, count)) chars += storedChars(message);
    log.chars -= chars;
    this.historyChars -= chars;
  }
}

/** Characters a kept message counts toward the history bounds: its payload and its except ids. */
function storedChars(message: BrokerMessage): number {
  let chars = message.payload.length;
  if (message.except) for (const id of message.except) chars += id.length;
  return chars;
}

/**
 * How many of `log`'s oldest messages hold at least `chars` characters, leaving at least `keep`
 * messages (its latest ones) whatever they hold.
 */
function countOver(log: TopicLog, chars: number, keep: number): number {
  const most = log.messages.length - keep;
  let count = 0;
  let freed = 0;
  while (count < most && freed < chars) freed += storedChars(log.messages[count++]!.message);
  return count;
}

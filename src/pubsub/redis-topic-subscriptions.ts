/*
 * The Redis broker's stream-backed topics: one subscription per topic, delivering every seq once
 * and in order. Live channel messages and catch-up reads from the stream meet here, on one
 * chain per topic, which is where gaps are filled, duplicates dropped and new epochs noticed.
 */
import type { Redis } from 'ioredis';
import { malformedExcept, parseExcept } from './broker.js';
import type { BrokerMessage } from './broker.js';
import { toError } from './redis-errors.js';
import { redisTopicKeys } from './redis-keys.js';
import type { RedisTopicKeys } from './redis-keys.js';
import { readTopic, renumberIfRewound } from './redis-scripts.js';
import type { Read, SeenSeq } from './redis-scripts.js';
import type { RedisScriptRunner } from './redis-script-runner.js';

interface TopicState {
  readonly topic: string;
  readonly keys: RedisTopicKeys;
  deliver: (message: BrokerMessage) => void;
  /** The epoch `lastSeq` belongs to; '' before the topic exists. */
  epoch: string;
  /** The last seq delivered (or skipped as before the subscription). */
  lastSeq: number;
  /** Work on this topic (live messages, catch-up) runs one item at a time, in order. */
  chain: Promise<void>;
  /** Items of asynchronous work queued or running on `chain`; while 0, work runs at once. */
  pending: number;
  /** Settles once the SUBSCRIBE is in place. */
  subscribed: Promise<void>;
  /** Set once `epoch` and `lastSeq` hold the starting point; reconnects leave it alone before. */
  started: boolean;
  retryTimer: NodeJS.Timeout | undefined;
  /** Characters of the live messages waiting on `chain` (at most MAX_QUEUED_LIVE_CHARS). */
  queuedChars: number;
  /** A catch-up is on `chain` for the live messages not kept past that bound. */
  catchUpQueued: boolean;
}

const CATCH_UP_BATCH = 512;
/**
 * The live messages of one topic kept while earlier work on it (a read of the stream) is under
 * way, in characters. Every one is in the stream too: past the bound, a message is left there
 * and one catch-up after the work queued reads what the stream keeps after the last delivered
 * (a span it no longer keeps reaches subscribers as a gap, as after a broker outage).
 */
export const MAX_QUEUED_LIVE_CHARS = 8 * 1_048_576;
const RETRY_CATCH_UP_MS = 1_000;

/** What the topic subscriptions need from their broker. */
export interface RedisTopicSubscriptionsOptions {
  prefix: string;
  /** The connection in subscriber mode that receives every topic channel. */
  subscriber: Redis;
  /** Runs the read script (on the command connection). */
  runner: RedisScriptRunner;
  /** True once the broker is closed: nothing more is delivered. */
  isClosed: () => boolean;
  unavailable: (cause?: unknown) => Error;
  onError: (error: Error) => void;
}

export class RedisTopicSubscriptions {
  private readonly prefix: string;
  private readonly subscriber: Redis;
  private readonly runner: RedisScriptRunner;
  private readonly isClosed: () => boolean;
  private readonly unavailable: (cause?: unknown) => Error;
  private readonly onError: (error: Error) => void;
  private readonly topics = new Map<string, TopicState>();
  /** Channel to topic, for live messages. */
  private readonly channels = new Map<string, string>();

  constructor(options: RedisTopicSubscriptionsOptions) {
    this.prefix = options.prefix;
    this.subscriber = options.subscriber;
    this.runner = options.runner;
    this.isClosed = options.isClosed;
    this.unavailable = options.unavailable;
    this.onError = options.onError;
  }

  /** Subscribe `topic` (or hand an existing subscription the new `deliver`). */
  async subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void> {
    const existing = this.topics.get(topic);
    if (existing) {
      existing.deliver = deliver;
      return existing.subscribed;
    }
    if (this.subscriber.status !== 'ready') throw this.unavailable();
    const keys = redisTopicKeys(this.prefix, topic);
    const state: TopicState = {
      topic,
      keys,
      deliver,
      epoch: '',
      lastSeq: 0,
      chain: Promise.resolve(),
      pending: 0,
      subscribed: Promise.resolve(),
      started: false,
      retryTimer: undefined,
      queuedChars: 0,
      catchUpQueued: false,
    };
    state.subscribed = this.startSubscription(state);
    this.topics.set(topic, state);
    this.channels.set(keys.channel, topic);
    try {
      await state.subscribed;
    } catch (error) {
      if (this.topics.get(topic) === state) this.forget(state);
      throw error;
    }
  }

  async unsubscribe(topic: string): Promise<void> {
    const state = this.topics.get(topic);
    if (!state) return;
    this.forget(state);
    if (this.subscriber.status !== 'ready') return; // not resubscribed after a reconnect anyway
    try {
      await this.subscriber.unsubscribe(state.keys.channel);
    } catch (error) {
      this.onError(toError(error));
    }
  }

  /** Drop every subscription (the broker is closing). */
  clear(): void {
    for (const state of [...this.topics.values()]) this.forget(state);
  }

  /** The last seq delivered of a subscribed topic, with its epoch; undefined before it has one. */
  seen(topic: string): SeenSeq | undefined {
    const state = this.topics.get(topic);
    return state?.started && state.epoch !== ''
      ? { epoch: state.epoch, seq: state.lastSeq }
      : undefined;
  }

  /** Anything that failed to catch up while the command connection was down tries again. */
  catchUpAll(): void {
    for (const state of this.topics.values()) if (state.started) this.catchUp(state);
  }

  /** The subscriber connection is back: SUBSCRIBE every started topic again and catch up. */
  async resubscribe(): Promise<void> {
    const states = [...this.topics.values()].filter((state) => state.started);
    if (states.length === 0 || this.isClosed()) return;
    await this.subscriber.subscribe(...states.map((state) => state.keys.channel));
    for (const state of states) this.catchUp(state);
  }

  /**
   * A message on a topic channel: `<epoch>:<seq>:<payload>`, or `<epoch>:<seq>:~<except>\n<payload>`
   * when it leaves sessions out (`<except>` a JSON list of their ids).
   */
  onLive(channel: string, message: string): void {
    const topic = this.channels.get(channel);
    const state = topic === undefined ? undefined : this.topics.get(topic);
    if (!state?.started) return;
    const first = message.indexOf(':');
    const second = first < 0 ? -1 : message.indexOf(':', first + 1);
    if (second < 0) return;
    const epoch = message.slice(0, first);
    const seq = Number(message.slice(first + 1, second));
    if (!Number.isSafeInteger(seq) || seq < 1) return;
    let payload = message.slice(second + 1);
    let except: readonly string[] | undefined;
    if (payload.startsWith('~')) {
      const end = payload.indexOf('\n');
      if (end < 0) return;
      except = parseExcept(payload.slice(1, end));
      if (!except) this.onError(malformedExcept(state.topic, seq));
      payload = payload.slice(end + 1);
    }
    if (state.pending === 0) {
      this.enqueue(state, () => this.live(state, epoch, seq, payload, except));
      return;
    }
    const chars = message.length;
    if (state.queuedChars + chars > MAX_QUEUED_LIVE_CHARS) {
      if (!state.catchUpQueued) {
        state.catchUpQueued = true;
        this.catchUp(state);
      }
      return;
    }
    state.queuedChars += chars;
    this.enqueue(state, () => {
      state.queuedChars -= chars;
      return this.live(state, epoch, seq, payload, except);
    });
  }

  /** Characters of `topic`'s live messages waiting behind earlier work (for tests). */
  queuedLiveChars(topic: string): number {
    return this.topics.get(topic)?.queuedChars ?? 0;
  }

  /**
   * Take the topic's current seq as the starting point, SUBSCRIBE, then catch up on what was
   * published in between: every message published after `subscribe` was called is delivered.
   */
  private async startSubscription(state: TopicState): Promise<void> {
    const start = await this.read(state, Number.MAX_SAFE_INTEGER, '+', 1);
    state.epoch = start.epoch;
    state.lastSeq = start.lastSeq;
    state.started = true;
    try {
      await this.subscriber.subscribe(state.keys.channel);
    } catch (error) {
      // The SUBSCRIBE may have run all the same (one timed out is not cancelled): undone, or the
      // topic's messages would go on coming to this node for nobody, until the connection drops.
      this.dropChannel(state);
      throw this.unavailable(error);
    }
    if (this.topics.get(state.topic) !== state) {
      // Unsubscribed while subscribing.
      this.dropChannel(state);
      return;
    }
    this.catchUp(state);
  }

  /** UNSUBSCRIBE `state`'s channel, unless a newer subscription of its topic owns it now. */
  private dropChannel(state: TopicState): void {
    const owner = this.topics.get(state.topic);
    if (owner !== undefined && owner !== state) return;
    if (this.subscriber.status !== 'ready') return; // gone with the connection anyway
    this.subscriber.unsubscribe(state.keys.channel).catch(() => undefined);
  }

  /** The topic's stream after `afterSeq` up to `toId`, with its epoch and latest seq. */
  private read(state: TopicState, afterSeq: number, toId: string, count: number): Promise<Read> {
    return readTopic(this.runner, state.keys, state.topic, afterSeq, toId, count, this.onError);
  }

  private forget(state: TopicState): void {
    clearTimeout(state.retryTimer);
    state.retryTimer = undefined;
    if (this.topics.get(state.topic) === state) {
      this.topics.delete(state.topic);
      this.channels.delete(state.keys.channel);
    }
  }

  private isCurrent(state: TopicState): boolean {
    return !this.isClosed() && this.topics.get(state.topic) === state;
  }

  /**
   * Run `work` in order with the topic's other work: at once when nothing is pending (a live
   * message is then fanned out in the I/O callback that read it, so the messages of one read
   * leave in one write per subscriber), else after what is pending.
   */
  private enqueue(state: TopicState, work: () => Promise<void> | void): void {
    if (state.pending > 0) {
      this.track(
        state,
        state.chain.then(() => (this.isCurrent(state) ? work() : undefined)),
      );
      return;
    }
    if (!this.isCurrent(state)) return;
    let result: Promise<void> | void;
    try {
      result = work();
    } catch (error) {
      this.onError(toError(error));
      return;
    }
    if (result) this.track(state, result);
  }

  /** Asynchronous work on the topic: later work waits for it. */
  private track(state: TopicState, work: Promise<void>): void {
    state.pending++;
    state.chain = work
      .catch((error: unknown) => this.onError(toError(error)))
      .finally(() => {
        state.pending--;
      });
  }

  private live(
    state: TopicState,
    epoch: string,
    seq: number,
    payload: string,
    except: readonly string[] | undefined,
  ): Promise<void> | void {
    if (epoch !== state.epoch) {
      // A new epoch: the topic was lost by Redis and started again at seq 1.
      if (state.epoch !== '') state.lastSeq = 0;
      state.epoch = epoch;
    }
    if (seq <= state.lastSeq) return; // already delivered (from the stream)
    if (seq > state.lastSeq + 1) {
      // A read of the stream failed and its retry is due: this message is in the stream too,
      // and the retry reads it, rather than every message queued behind the failure trying
      // (and waiting on) a read of its own.
      if (state.retryTimer) return;
      return this.fillGap(state, seq, payload, except);
    }
    this.emit(state, seq, payload, except);
  }

  /** Missed messages (a reconnect): deliver them from the stream first, then this one. */
  private async fillGap(
    state: TopicState,
    seq: number,
    payload: string,
    except: readonly string[] | undefined,
  ): Promise<void> {
    let read: Read;
    try {
      read = await this.read(state, state.lastSeq, `${seq - 1}-0`, 0);
    } catch (error) {
      // This message is in the stream too: the retry reads it from there.
      this.onError(toError(error));
      this.scheduleRetry(state);
      return;
    }
    if (!this.isCurrent(state)) return;
    if (read.epoch !== state.epoch) {
      this.catchUp(state);
      return;
    }
    for (const message of read.messages)
      this.emit(state, message.seq, message.payload, message.except);
    this.emit(state, seq, payload, except);
  }

  /** Deliver, in order, what the stream holds after the last delivered seq. */
  private catchUp(state: TopicState): void {
    this.enqueue(state, async () => {
      clearTimeout(state.retryTimer);
      state.retryTimer = undefined;
      state.catchUpQueued = false;
      let renumbered = false;
      try {
        for (;;) {
          const read = await this.read(state, state.lastSeq, '+', CATCH_UP_BATCH);
          if (!this.isCurrent(state)) return;
          if (read.epoch !== state.epoch) {
            const restarted = state.epoch !== '';
            state.epoch = read.epoch;
            if (restarted) {
              state.lastSeq = 0;
              continue;
            }
          }
          if (read.lastSeq < state.lastSeq) {
            // Same epoch but an older seq: Redis came back from an older snapshot, without
            // messages it had acknowledged, and would give their seqs to new ones under the
            // same epoch, which no subscriber or resuming client could tell from the lost ones.
            // The topic is numbered anew for every node (a new epoch), and read again.
            // (Once: read again, it is numbered anew, or by another node, or has gone past.)
            if (!renumbered) {
              renumbered = true;
              await renumberIfRewound(this.runner, state.keys, {
                epoch: state.epoch,
                seq: state.lastSeq,
              });
              continue;
            }
            state.lastSeq = read.lastSeq;
            return;
          }
          for (const message of read.messages)
            this.emit(state, message.seq, message.payload, message.except);
          if (read.messages.length < CATCH_UP_BATCH) return;
        }
      } catch (error) {
        this.onError(toError(error));
        this.scheduleRetry(state);
      }
    });
  }

  private scheduleRetry(state: TopicState): void {
    if (state.retryTimer || !this.isCurrent(state)) return;
    state.retryTimer = setTimeout(() => {
      state.retryTimer = undefined;
      if (this.isCurrent(state)) this.catchUp(state);
    }, RETRY_CATCH_UP_MS);
    state.retryTimer.unref();
  }

  /** Deliver one message (with the session ids it leaves out, if any). */
  private emit(state: TopicState, seq: number, payload: string, except?: readonly string[]): void {
    if (seq <= state.lastSeq || !this.isCurrent(state)) return;
    state.lastSeq = seq;
    const epoch = state.epoch || undefined;
    try {
      state.deliver(
        except
          ? { topic: state.topic, seq, payload, epoch, except }
          : { topic: state.topic, seq, payload, epoch },
      );
    } catch (error) {
      this.onError(toError(error));
    }
  }
}

/*
 * Stream-backed topics on NATS: one ordered JetStream consumer per subscribed topic, resuming
 * after the last seq delivered whenever it has to be recreated (a reconnect, a consumer lost
 * on the server, a stream made again), so each retained message is delivered once, in order.
 */
import { DeliverPolicy } from '@nats-io/jetstream';
import type { Consumer, ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import type { BrokerMessage } from './broker.js';
import { bounded, noop, withTimeout } from './nats-link.js';
import type { Link } from './nats-link.js';
import { natsTopicNames } from './nats-names.js';
import type { NatsStreams } from './nats-streams.js';

/** One live `subscribe`: where delivery stands and the consumer feeding it. */
interface TopicSubscription {
  readonly topic: string;
  deliver: (message: BrokerMessage) => void;
  /** The last sequence number handed to `deliver`; the consumer resumes after it. */
  lastSeq: number;
  /** The stream's creation time: a stream deleted and made again numbers from 1 anew. */
  epoch?: string;
  active: boolean;
  /** Bumped on every (re)start, so a stale consumer's messages are ignored. */
  generation: number;
  consumer?: Consumer;
  messages?: ConsumerMessages;
  restartTimer?: NodeJS.Timeout;
}

/** What the consumers need from their broker. */
export interface NatsConsumersOptions {
  prefix: string;
  timeoutMs: number;
  streams: NatsStreams;
  /** The connection's handles while connected; undefined while disconnected. */
  liveLink: () => Link | undefined;
  /** True once the broker is closed. */
  isClosed: () => boolean;
  onError: (err: unknown) => void;
}

export class NatsConsumers {
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private readonly streams: NatsStreams;
  private readonly liveLink: () => Link | undefined;
  private readonly isClosed: () => boolean;
  private readonly onError: (err: unknown) => void;
  private readonly subscriptions = new Map<string, TopicSubscription>();

  constructor(options: NatsConsumersOptions) {
    this.prefix = options.prefix;
    this.timeoutMs = options.timeoutMs;
    this.streams = options.streams;
    this.liveLink = options.liveLink;
    this.isClosed = options.isClosed;
    this.onError = options.onError;
  }

  /** Hand an existing subscription of `topic` the new `deliver`; false when there is none. */
  redeliver(topic: string, deliver: (message: BrokerMessage) => void): boolean {
    const existing = this.subscriptions.get(topic);
    if (!existing) return false;
    existing.deliver = deliver;
    return true;
  }

  /** Deliver what is published on `topic` from now on. */
  async subscribe(
    link: Link,
    topic: string,
    deliver: (message: BrokerMessage) => void,
  ): Promise<void> {
    const what = `subscribe to "${topic}"`;
    const sub: TopicSubscription = { topic, deliver, lastSeq: 0, active: true, generation: 0 };
    this.subscriptions.set(topic, sub);
    try {
      await bounded(what, this.timeoutMs, async () => {
        // New messages only: start after what the topic holds now.
        const info = await this.streams.streamInfoOrCreate(link, topic);
        sub.lastSeq = info.state.last_seq;
        sub.epoch = info.created;
        await this.startConsumer(link, sub);
      });
    } catch (err) {
      if (this.subscriptions.get(topic) === sub) this.subscriptions.delete(topic);
      sub.active = false;
      void this.stopConsumer(sub);
      throw err;
    }
  }

  async unsubscribe(topic: string): Promise<void> {
    const sub = this.subscriptions.get(topic);
    if (!sub) return;
    this.subscriptions.delete(topic);
    sub.active = false;
    await bounded(`unsubscribe from "${topic}"`, this.timeoutMs, () =>
      this.stopConsumer(sub),
    ).catch(this.onError);
  }

  /** Stop every subscription for good (the broker is closing). */
  stopAll(): Promise<void>[] {
    const pending: Promise<void>[] = [];
    for (const sub of this.subscriptions.values()) {
      sub.active = false;
      pending.push(this.stopConsumer(sub));
    }
    this.subscriptions.clear();
    return pending;
  }

  /** Disconnected: stop every consumer locally until `restartAll`. */
  suspendAll(): void {
    for (const sub of this.subscriptions.values()) this.suspend(sub);
  }

  /** (Re)connected: recreate every consumer after its last delivered seq. */
  restartAll(): void {
    for (const sub of this.subscriptions.values()) this.scheduleRestart(sub, 0);
  }

  /** (Re)start the subscription's ordered consumer right after its last delivered seq. */
  private async startConsumer(link: Link, sub: TopicSubscription): Promise<void> {
    const generation = ++sub.generation;
    const stale = (): boolean => !sub.active || sub.generation !== generation || this.isClosed();
    void this.retire(sub);
    const { stream } = natsTopicNames(this.prefix, sub.topic);
    const consumer = await link.js.consumers.get(stream, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: sub.lastSeq + 1,
    });
    if (stale()) {
      consumer.delete().catch(noop);
      return;
    }
    const messages = await consumer.consume({
      max_messages: 256,
      // Also the idle-heartbeat period (half of it) that detects a consumer lost on the server.
      expires: 10_000,
      callback: (m) => this.receive(sub, generation, m),
    });
    if (stale()) {
      messages.stop();
      consumer.delete().catch(noop);
      return;
    }
    sub.consumer = consumer;
    sub.messages = messages;
    void messages.closed().then((err) => {
      // Ended on its own (not by us): recreate it from the last delivered seq.
      if (!stale()) {
        if (err) this.onError(err);
        this.scheduleRestart(sub, 1);
      }
    }, this.onError);
  }

  private receive(sub: TopicSubscription, generation: number, m: JsMsg): void {
    if (!sub.active || sub.generation !== generation || m.seq <= sub.lastSeq) return;
    sub.lastSeq = m.seq;
    try {
      sub.deliver({ topic: sub.topic, seq: m.seq, payload: m.string(), epoch: sub.epoch });
    } catch (err) {
      this.onError(err);
    }
  }

  /** Stop delivery for good (unsubscribe, close, failed subscribe). */
  private stopConsumer(sub: TopicSubscription): Promise<void> {
    clearTimeout(sub.restartTimer);
    sub.restartTimer = undefined;
    sub.generation++;
    return this.retire(sub);
  }

  /** Stop the current consumer and delete it on the server (best effort, if connected). */
  private retire(sub: TopicSubscription): Promise<void> {
    const { messages, consumer } = sub;
    sub.messages = undefined;
    sub.consumer = undefined;
    messages?.stop();
    if (!consumer || !this.liveLink()) return Promise.resolve();
    return consumer.delete().then(noop, noop);
  }

  /**
   * Disconnected: stop the consumer locally, so the client library does not also try to
   * recover it; the reconnect handler recreates it (and deletes the old one if it survived).
   */
  private suspend(sub: TopicSubscription): void {
    clearTimeout(sub.restartTimer);
    sub.restartTimer = undefined;
    sub.generation++;
    sub.messages?.stop();
    sub.messages = undefined;
  }

  private scheduleRestart(sub: TopicSubscription, attempt: number): void {
    if (!sub.active || this.isClosed()) return;
    clearTimeout(sub.restartTimer);
    const delay = attempt === 0 ? 0 : Math.min(2_000, 100 * 2 ** attempt);
    sub.restartTimer = setTimeout(() => {
      sub.restartTimer = undefined;
      void this.restart(sub, attempt);
    }, delay);
  }

  private async restart(sub: TopicSubscription, attempt: number): Promise<void> {
    const link = this.liveLink();
    // While disconnected, the reconnect handler restarts every subscription.
    if (!sub.active || this.isClosed() || !link) return;
    try {
      await withTimeout(
        (async () => {
          const info = await this.streams.streamInfoOrCreate(link, sub.topic);
          if (sub.epoch !== undefined && info.created !== sub.epoch) {
            // The stream was deleted and made again: its numbering starts from 1 anew.
            sub.lastSeq = 0;
          }
          sub.epoch = info.created;
          await this.startConsumer(link, sub);
        })(),
        this.timeoutMs,
        `resume "${sub.topic}"`,
      );
    } catch (err) {
      this.onError(err);
      this.scheduleRestart(sub, attempt + 1);
    }
  }
}

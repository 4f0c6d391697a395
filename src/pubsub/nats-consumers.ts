/*
 * Stream-backed topics on NATS: one ordered JetStream consumer per subscribed topic, resuming
 * after the last seq delivered whenever it has to be recreated (a reconnect, a consumer lost
 * on the server, a stream made again), so each retained message is delivered once, in order.
 *
 * A subscribe creates no stream. A topic nobody has published to has none: its subscription
 * waits, listening (core NATS) for JetStream's advisory that the stream was created, then
 * starts its consumer at seq 1 of the new stream, so it gets every message published after it
 * subscribed (what the stream still holds when the consumer starts: a topic whose history is
 * shorter than what is published in those few round trips has the rest trimmed, which the
 * gateway tells its subscribers as a gap). The subject itself is never listened to outside
 * JetStream: a publish to a stream deleted behind a node's back finds no responders, and that
 * node makes the stream again.
 */
import { DeliverPolicy } from '@nats-io/jetstream';
import type { Consumer, ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { BrokerMessage } from './broker.js';
import { malformedExcept } from './broker.js';
import { exceptOf } from './nats-except.js';
import { bounded, noop, withTimeout } from './nats-link.js';
import type { Link } from './nats-link.js';
import { natsTopicNames } from './nats-names.js';
import { isStreamNotFound } from './nats-streams.js';
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
  /**
   * While the topic has no stream: the advisory subscription that tells when it is made, and the
   * connection it listens on (one closed for good hears nothing: listened to again on the next).
   */
  awaitingStream?: { nc: NatsConnection; subscription: Subscription };
}

/** The subject on which JetStream announces that a stream was created. */
function streamCreatedSubject(stream: string): string {
  return `$JS.EVENT.ADVISORY.STREAM.CREATED.${stream}`;
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
        const info = await this.streamOrAwait(link, sub);
        // No stream yet: nothing was published; the consumer starts at the stream's seq 1.
        if (!info) return;
        // New messages only: start after what the topic holds now.
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

  /**
   * Stop delivering `topic`. The last subscriber anywhere takes an idle stream with it (no
   * message retained, no consumer left on any node): see `NatsStreams.deleteIfIdle`.
   */
  async unsubscribe(topic: string): Promise<void> {
    const sub = this.subscriptions.get(topic);
    if (!sub) return;
    this.subscriptions.delete(topic);
    sub.active = false;
    // Still waiting for its stream: there was none at the last look (a sweep finds any since).
    const hadStream = sub.awaitingStream === undefined;
    await bounded(`unsubscribe from "${topic}"`, this.timeoutMs, async () => {
      await this.stopConsumer(sub);
      const link = this.liveLink();
      // Subscribed again meanwhile: that subscription uses the stream.
      if (link && hadStream && !this.subscriptions.has(topic)) {
        await this.streams.deleteIfIdle(link, topic);
      }
    }).catch(this.onError);
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

  /**
   * The topic's stream; or, when it has none, undefined, with the subscription listening for
   * the stream's creation (the listening starts before the look, so a stream made in between
   * is seen by one or the other).
   */
  private async streamOrAwait(link: Link, sub: TopicSubscription) {
    // Listening on a connection closed since: the stream may have been made meanwhile unheard.
    if (sub.awaitingStream && sub.awaitingStream.nc !== link.nc) this.stopAwaiting(sub);
    const existing = sub.awaitingStream
      ? undefined
      : await this.streams.streamInfo(link, sub.topic);
    if (existing) return existing;
    // Ended while the look was under way (its subscribe timed out, an unsubscribe): nothing
    // listens for it any more, and nothing may be left listening in its name.
    if (!sub.active) return undefined;
    if (!sub.awaitingStream) {
      const { stream } = natsTopicNames(this.prefix, sub.topic);
      const subscription = link.nc.subscribe(streamCreatedSubject(stream), {
        callback: (err) => {
          if (err) this.onError(err);
          else if (sub.awaitingStream?.subscription === subscription) this.scheduleRestart(sub, 0);
        },
      });
      sub.awaitingStream = { nc: link.nc, subscription };
      // The server has the interest once this round trip is back.
      await link.nc.flush();
    }
    const info = await this.streams.streamInfo(link, sub.topic);
    if (info || !sub.active) this.stopAwaiting(sub);
    return info;
  }

  private stopAwaiting(sub: TopicSubscription): void {
    sub.awaitingStream?.subscription.unsubscribe();
    sub.awaitingStream = undefined;
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
      // A consumer or stream gone ends the consume (closed, below) rather than being recreated
      // by the client library at the same position: the stream may have been made again.
      abort_on_missing_resource: true,
      callback: (m) => this.receive(sub, generation, m),
    });
    if (stale()) {
      messages.stop();
      consumer.delete().catch(noop);
      return;
    }
    sub.consumer = consumer;
    sub.messages = messages;
    void (async () => {
      for await (const status of messages.status()) {
        if (stale()) return;
        // The library is about to recreate the ordered consumer by itself (a delivery out of
        // order; a consumer or stream gone ends the consume instead, above), after the last
        // stream seq it saw, on whatever stream has the name then: one deleted and made again
        // numbers from 1 anew, and its first messages would be skipped and the rest delivered
        // under the old epoch. Taken over: nothing more of this consumer is delivered, and
        // restart() looks at the stream first.
        if (status.type === 'reset') {
          sub.generation++;
          this.scheduleRestart(sub, 0);
          return;
        }
      }
    })().catch(this.onError);
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
      const message: BrokerMessage = {
        topic: sub.topic,
        seq: m.seq,
        payload: m.string(),
        epoch: sub.epoch,
      };
      // Only a message that leaves sessions out has headers.
      const except = m.headers === undefined ? undefined : exceptOf(m.headers);
      if (except === 'malformed') this.onError(malformedExcept(sub.topic, m.seq));
      else if (except) message.except = except;
      sub.deliver(message);
    } catch (err) {
      this.onError(err);
    }
  }

  /** Stop delivery for good (unsubscribe, close, failed subscribe). */
  private stopConsumer(sub: TopicSubscription): Promise<void> {
    clearTimeout(sub.restartTimer);
    sub.restartTimer = undefined;
    sub.generation++;
    this.stopAwaiting(sub);
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
          const info = await this.streamOrAwait(link, sub);
          if (!info) {
            // No stream (never published, or deleted): wait for the next one to be made.
            void this.retire(sub);
            return;
          }
          if (sub.epoch !== undefined && info.created !== sub.epoch) {
            // The stream was deleted and made again: its numbering starts from 1 anew.
            sub.lastSeq = 0;
          } else if (info.state.last_seq < sub.lastSeq) {
            // The same stream, its count back below what was delivered here: NATS lost
            // messages it had acknowledged (its store came back older: a crash before they
            // reached the disk, a restored backup) and gives their seqs to new ones under the
            // same epoch. Resumed from there, so the new ones are delivered: their seqs going
            // back tell this node's subscribers of the new numbering (a gap of unknown size),
            // where resuming after the last seq delivered would skip them in silence.
            sub.lastSeq = info.state.last_seq;
          }
          sub.epoch = info.created;
          await this.startConsumer(link, sub);
        })(),
        this.timeoutMs,
        `resume "${sub.topic}"`,
      );
    } catch (err) {
      // A stream deleted between the look and the consumer is waited for at the next attempt.
      if (!isStreamNotFound(err)) this.onError(err);
      this.scheduleRestart(sub, attempt + 1);
    }
  }
}

/*
 * `$`-topics on Redis: messages addressed to a node or a user (see SessionRouter). They go over
 * plain channels, with no seq, stream or catch-up: a stream per node or user would only pile
 * up, and the router retries what it needs to.
 */
import type { Redis } from 'ioredis';
import type { BrokerMessage } from './broker.js';
import { toError } from './redis-errors.js';
import { redisDirectChannel } from './redis-keys.js';

/** What the direct channels need from their broker. */
export interface RedisDirectChannelsOptions {
  prefix: string;
  /** Publishes go out on the command connection. */
  command: Redis;
  /** The connection in subscriber mode. */
  subscriber: Redis;
  /** True once the broker is closed. */
  isClosed: () => boolean;
  unavailable: (cause?: unknown) => Error;
  onError: (error: Error) => void;
}

export class RedisDirectChannels {
  private readonly prefix: string;
  private readonly command: Redis;
  private readonly subscriber: Redis;
  private readonly isClosed: () => boolean;
  private readonly unavailable: (cause?: unknown) => Error;
  private readonly onError: (error: Error) => void;
  /** Subscribed `$`-topics by channel. */
  private readonly direct = new Map<
    string,
    { topic: string; deliver: (message: BrokerMessage) => void }
  >();

  constructor(options: RedisDirectChannelsOptions) {
    this.prefix = options.prefix;
    this.command = options.command;
    this.subscriber = options.subscriber;
    this.isClosed = options.isClosed;
    this.unavailable = options.unavailable;
    this.onError = options.onError;
  }

  /** Resolves with 0: addressed messages have no seq. */
  async publish(topic: string, payload: string): Promise<number> {
    // Addressed to a node or user: a plain channel message, no counter or stream to keep.
    await this.command.publish(this.directChannel(topic), payload);
    return 0;
  }

  async subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void> {
    if (this.subscriber.status !== 'ready') throw this.unavailable();
    const channel = this.directChannel(topic);
    const entry = { topic, deliver };
    this.direct.set(channel, entry);
    try {
      await this.subscriber.subscribe(channel);
    } catch (error) {
      // Not kept for resubscription; the SUBSCRIBE may have run all the same, so undo it.
      if (this.direct.get(channel) === entry) {
        this.direct.delete(channel);
        this.subscriber.unsubscribe(channel).catch(() => undefined);
      }
      throw error;
    }
  }

  async unsubscribe(topic: string): Promise<void> {
    const channel = this.directChannel(topic);
    if (!this.direct.delete(channel) || this.subscriber.status !== 'ready') return;
    await this.subscriber
      .unsubscribe(channel)
      .catch((error: unknown) => this.onError(toError(error)));
  }

  /** The subscriber connection is back: SUBSCRIBE every direct channel again. */
  async resubscribe(): Promise<void> {
    if (this.direct.size > 0 && !this.isClosed())
      await this.subscriber.subscribe(...this.direct.keys());
  }

  /** Deliver a message if `channel` is a subscribed direct channel; false if it is not one. */
  onLive(channel: string, message: string): boolean {
    const direct = this.direct.get(channel);
    if (!direct) return false;
    direct.deliver({ topic: direct.topic, seq: 0, payload: message });
    return true;
  }

  private directChannel(topic: string): string {
    return redisDirectChannel(this.prefix, topic);
  }
}

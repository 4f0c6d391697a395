// The shapes of pub/sub: what an application declares (methods, topic options, stream handlers)
// and what the service keeps per session. Apart from the service so the options and gateway
// modules can name these types without the service's code, and so its parts can share them.
import type { StandsFor } from './stream-context.js';
import type { Observable } from 'rxjs';
import type { HandlerContext } from '../peer/handler-context.js';
import { DEFAULT_SUBSCRIPTION_METHODS } from '../protocol/subscription-frames.js';
import type { SubscriptionMethodNames } from '../protocol/subscription-frames.js';
import type { Retention } from '../pubsub/broker.js';
import type { Delivery, FlowControl } from '../pubsub/delivery.js';
import type { DrainWaiters } from '../pubsub/drain-waiters.js';
import type { Sink } from '../pubsub/sink.js';
import type { Slots } from '../pubsub/slots.js';
import type { CompactMap } from './compact-map.js';
import type { HeldOutput } from './held-output.js';
import type { TokenBucket } from './token-bucket.js';
import type { Session } from './session.js';
import type { TopicPresenceOptions } from './presence-options.js';

/** The subscription protocol's method names: see src/protocol/subscription-frames.ts. */
export type SubscriptionMethods = SubscriptionMethodNames;

/** "subscribe", "subscription", "unsubscribe" (the names are defined once, in the protocol layer). */
export const defaultSubscriptionMethods: SubscriptionMethods = { ...DEFAULT_SUBSCRIPTION_METHODS };

export interface TopicOptions<C> extends Partial<FlowControl> {
  /** Decide whether `session` may subscribe; false rejects with -32004 Unauthorized. */
  authorize?: (request: {
    session: Session<C>;
    topic: string;
    params: unknown;
    /**
     * True when a subscription is weighed again at a refresh (the session's context replaced):
     * false ends it with -32004. Absent on a subscribe.
     */
    refresh?: boolean;
  }) => boolean | Promise<boolean>;
  /** What the broker keeps for clients that resume (default 1 000 messages, 10 minutes). */
  history?: Partial<Retention>;
  /**
   * Who is subscribed, on every node (docs/pubsub.md, Presence): `true`, or `{ info, maxListed }`.
   * Each subscription to the topic is a member while it lasts.
   */
  presence?: boolean | TopicPresenceOptions<C>;
  /**
   * A latest-value topic: a new subscriber (one that asks for no `since` or `position`) first
   * gets the topic's last message, while history still holds it, then the live ones.
   */
  latestValue?: boolean;
}

/** How `gateway.publish` sends one message. */
export interface PublishOptions {
  /**
   * Session ids (one, or at most 64) that do not get the message, on any node: a broadcast
   * without echo to its sender. History keeps the message for everyone (a resume replays it).
   */
  except?: string | readonly string[];
}

/**
 * Builds one subscriber's stream: an Observable, or an async iterable such as the generator of an
 * `async function*` handler (each yield is a message, returning completes the subscription,
 * throwing ends it with the error), or a promise of either. `ctx.signal` lives as long as the
 * stream: it aborts when the subscriber unsubscribes, the connection closes, or the stream ends.
 * The service reads an iterable through rxjs `from`, which returns a generator at its next
 * `yield` after the subscriber left; a generator awaiting something that may never come should
 * hand that wait `ctx.signal` (or race it), so that it ends at once.
 */
export type StreamHandler<C, P = unknown, T = unknown> = (
  params: P,
  ctx: HandlerContext<Session<C>>,
) => Observable<T> | AsyncIterable<T> | Promise<Observable<T> | AsyncIterable<T>>;

export interface PubSubStats {
  /** Messages not delivered to some subscriber because it was slow (drop and keep-latest). */
  dropped: number;
  /** Connections closed with 1013 by the `disconnect` policy. */
  slowConsumerDisconnects: number;
}

export interface SessionSubscription {
  topic: string | undefined;
  /**
   * What the subscribe carried for the topic's `authorize`, kept only when the topic has one
   * (asked again after a refresh).
   */
  params?: unknown;
  /** A stream that stands for a topic (`$presence`): whether it may go on after a refresh. */
  standsFor?: StandsFor;
  delivery: Delivery;
  /** Ends a stream's source, or detaches a topic delivery. */
  teardown: () => void;
}

export interface SessionTable {
  /** The session, as the socket fan-out writes to. */
  sink: Sink;
  /** By subscription id; most connections hold one (CompactMap keeps it without a hash table). */
  subscriptions: CompactMap<string, SessionSubscription>;
  /**
   * UTF-8 bytes of the topic names its subscriptions hold (topic and `$presence`) and of the
   * params kept for them, subscribes under way included.
   */
  topicBytes: number;
  // The three below are made when first needed: a connection that never resumes from a
  // position holds neither of the first two, and only the first subscriber of a topic brings it
  // onto the node.
  /** Its history reads (resume replays): a page is read holding one. */
  historySlots: Slots | undefined;
  /** Its replays waiting for the socket to drain, on one listener. */
  drains: DrainWaiters | undefined;
  /** Its subscribes that bring a topic onto this node's broker link. */
  newTopics: TokenBucket | undefined;
  /** What its subscriptions hold back during replays (made at the first), counted as its output. */
  held: HeldOutput | undefined;
}

/** The limits the pub/sub service applies (GatewayLimits, resolved). */
export interface PubSubLimits {
  maxSubscriptions: number;
  maxTopicNameBytes: number;
  maxTopicBytesPerConnection: number;
  maxHistoryReadsPerConnection: number;
  maxHistoryReads: number;
  newTopicSubscribesPerSecond: number;
  newTopicSubscribesBurst: number;
}

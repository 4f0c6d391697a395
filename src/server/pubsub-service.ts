import { isObservable } from 'rxjs';
import type { Observable, Subscription } from 'rxjs';
import type { HandlerContext } from '../peer/handler-context.js';
import type { Logger } from '../peer/logger.js';
import type { MethodRegistry } from '../peer/method-registry.js';
import { assertEncodable } from '../encoding/encoded-depth.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { InvalidParamsError, ServerError } from '../protocol/errors.js';
import { ConnectionClosedError } from '../protocol/local-errors.js';
import { isWellFormed } from '../protocol/well-formed.js';
import {
  PublishUnconfirmedError,
  TopicCreationLimitError,
  defaultRetention,
  exceptList,
} from '../pubsub/broker.js';
import type { Broker, BrokerMessage, Retention } from '../pubsub/broker.js';
import { Delivery, defaultFlowControl } from '../pubsub/delivery.js';
import type { FlowControl } from '../pubsub/delivery.js';
import { finalTail, notificationHead } from '../pubsub/frames.js';
import { DrainWaiters } from '../pubsub/drain-waiters.js';
import { HistoryReads } from '../pubsub/history-reads.js';
import type { Sink } from '../pubsub/sink.js';
import { Slots } from '../pubsub/slots.js';
import { readSubscribeParams, readUnsubscribeParams } from '../pubsub/subscribe-params.js';
import type { SubscribeRequest } from '../pubsub/subscribe-params.js';
import { TopicRegistry } from '../pubsub/topic-registry.js';
import { readHistoryParams } from '../pubsub/history-params.js';
import {
  HeldHistory,
  HeldHistoryRefusal,
  HistoryHeldByAddress,
  readTopicHistory,
} from './pubsub-history.js';
import type { HistoryPage } from './pubsub-history.js';
import { readLatestValue, sendLatestValue } from './pubsub-latest.js';
import type { LatestValue } from './pubsub-latest.js';
import { readPosition, replay, tellPosition } from './pubsub-resume.js';
import type { Placement } from './pubsub-resume.js';
import { attachStream } from './pubsub-stream.js';
import { checkStreamDeclaration } from './topic-declaration.js';
import { CompactMap } from './compact-map.js';
import type { HeldOutput } from './held-output.js';
import type { BudgetLedger } from '../transport/output-budget.js';
import { StreamContext } from './stream-context.js';
import { pullGateOf, pulledSource } from './pulled-stream.js';
import type {
  PubSubLimits,
  PubSubStats,
  PublishOptions,
  SessionSubscription,
  SessionTable,
  StreamHandler,
  SubscriptionMethods,
  TopicOptions,
} from './pubsub-types.js';
import type { Session } from './session.js';
import { defaultLimits } from './options.js';
import type { GatewayLimits } from './options.js';
import { RateLimit, TokenBucket } from './token-bucket.js';
import { AddressBudgets, AddressBudget, PairedBucket, unboundedLimit } from './address-budgets.js';
import { addressGroupOf } from './address-group.js';
import { PARAMS_NOT_KEPT, TopicSubscription, topicBytesOf } from './topic-subscription.js';
import type { KeptParams, TopicEnds, TopicRoute } from './topic-subscription.js';
import { claimsAllow } from './claims-authorization.js';
import { pushUnsupported } from './session.js';
import {
  INBOX_SUBSCRIPTION,
  INBOX_TOPIC_PREFIX,
  brokerUnavailable,
  inboxTopic,
} from './session-router.js';

// The public shapes live in pubsub-types.ts; they are still imported from here.
export { defaultSubscriptionMethods } from './pubsub-types.js';
export type {
  PubSubLimits,
  PubSubStats,
  StreamHandler,
  SubscriptionMethods,
  TopicOptions,
} from './pubsub-types.js';

/** User inboxes (GatewayOptions.userInbox), as the service serves them. */
export interface PubSubInbox {
  /** What the broker keeps of each user's messages. */
  retention: Retention;
  /** Every message of an inbox topic this node holds, for the user's sessions that take it plain. */
  received: (message: BrokerMessage) => void;
}

/**
 * An inbox subscriber must not lose messages: past the high-water mark its connection is
 * closed (1013) and the client resumes from the last message it has, from history.
 */
const INBOX_FLOW: FlowControl = { ...defaultFlowControl, slowConsumer: 'disconnect' };

/**
 * The broker's subscription half as the topic registry sees it, when user inboxes are on:
 * the messages of inbox topics also go to `received` (the user's plain sessions), after the
 * registry's own subscribers, on the one broker subscription the registry holds per topic (a
 * broker keeps one deliver callback per topic, so nobody else may subscribe those topics).
 */
function inboxTap(
  inner: Broker,
  received: (message: BrokerMessage) => void,
): Pick<Broker, 'subscribe' | 'unsubscribe' | 'trustedPayloads'> {
  return {
    trustedPayloads: inner.trustedPayloads,
    subscribe: (topic, deliver) =>
      topic.startsWith(INBOX_TOPIC_PREFIX)
        ? inner.subscribe(topic, (message) => {
            deliver(message);
            received(message);
          })
        : inner.subscribe(topic, deliver),
    unsubscribe: (topic) => inner.unsubscribe(topic),
  };
}

interface TopicDefinition<C> {
  pattern: string;
  options: TopicOptions<C>;
  flow: FlowControl;
  retention: Retention;
}

/**
 * Topics, per-subscriber streams and the subscribe/unsubscribe methods.
 * A subscription is accepted or rejected by the reply to subscribe, and its
 * first message is sent only after that reply (ctx.afterReply).
 */
export class PubSubService<C> {
  private readonly registry: TopicRegistry;
  private readonly definitions = new Map<string, TopicDefinition<C>>();
  private readonly prefixes: TopicDefinition<C>[] = [];
  private readonly streams = new Map<string, { handler: StreamHandler<C>; flow: FlowControl }>();
  private readonly tables = new Map<Session<C>, SessionTable>();
  /**
   * How many times each session's context was replaced while it could have calls under way (a
   * refresh, which `reauthorize` is told of): a call that weighed a topic against the session's
   * identity and then awaited compares it before it takes effect (see `takeEffect`).
   */
  private readonly refreshes = new WeakMap<Session<C>, number>();
  private readonly head: string;
  /** What every topic subscription's end tells (one object for all of them). */
  private readonly topicEnds: TopicEnds<C>;
  private nextId = 0;
  private readonly limits: PubSubLimits & AddressLimits;
  /** A connection's new-topic subscribes (limits.newTopicSubscribesPerSecond); undefined: off. */
  private readonly newTopicLimit: RateLimit | undefined;
  /**
   * The new-topic subscribes of each address group's connections together
   * (limits.newTopicSubscribesPerSecondPerIp): an entry per group with a connection that has
   * subscribed to a new topic, held until it closes (detach). Undefined: off.
   */
  private readonly newTopicAddresses: AddressBudgets | undefined;
  /** The node's history reads (resume replays): bounded, identical ones shared. */
  readonly historyReads: HistoryReads;
  /** What each connection's answered `history` calls hold while their replies wait. */
  private readonly heldHistory = new WeakMap<SessionTable, HeldHistory>();
  /** The same, for each address group's connections together. */
  private readonly heldHistoryByAddress = new HistoryHeldByAddress();
  readonly stats: PubSubStats = { dropped: 0, slowConsumerDisconnects: 0 };
  /**
   * Topic patterns a session's claims allow (`identity.topicsOf`), checked before a topic's
   * own `authorize`; set by the gateway.
   */
  topicsOf: ((context: C) => readonly string[] | undefined) | undefined;
  /**
   * Called as each topic subscription starts (presence, src/server/presence-service.ts); the
   * function it returns runs when the subscription ends. Set by the gateway.
   */
  onTopicSubscribed: ((session: Session<C>, topic: string) => (() => void) | undefined) | undefined;
  /**
   * The node's output budget (limits.maxBufferedBytesTotal), which what a connection's
   * subscriptions hold back during replays counts toward; set by the gateway when it has one.
   */
  outputBudget: BudgetLedger | undefined;
  /** Topics the node holds on the broker: the registry's and the `$presence` channels it watches. */
  topicsHeld(): number {
    return this.registry.topicCount + this.watchedPresenceTopics();
  }

  /**
   * The topics whose `$presence` the node watches (each a broker channel of its own), counted
   * with the registry's toward `maxTopics`; set by the gateway when presence is on.
   */
  watchedPresenceTopics: () => number = () => 0;
  /** Told when a session's topic subscription starts and ends (gateway.events$); set by the gateway. */
  lifecycle:
    | {
        subscribed(session: Session<C>, topic: string): void;
        unsubscribed(session: Session<C>, topic: string): void;
      }
    | undefined;

  constructor(
    readonly broker: Broker,
    readonly methods: SubscriptionMethods,
    /** The gateway's limits (or, as before, just `maxSubscriptions`). */
    limits: PubSubLimits | number,
    private readonly logger: Logger,
    private readonly exposeErrorDetails: boolean,
    /** Set when the gateway keeps user inboxes (`$inbox` subscriptions). */
    private readonly inbox?: PubSubInbox,
  ) {
    this.head = notificationHead(methods.notification);
    this.limits =
      typeof limits === 'number'
        ? { ...defaultLimits, maxSubscriptions: limits }
        : { ...defaultLimits, ...limits };
    this.historyReads = new HistoryReads(broker, this.limits.maxHistoryReads);
    const { newTopicSubscribesPerSecond: perSecond, newTopicSubscribesBurst: burst } = this.limits;
    this.newTopicLimit = perSecond > 0 ? new RateLimit(perSecond, burst) : undefined;
    this.newTopicAddresses = newTopicAddressesOf(this.limits);
    this.registry = new TopicRegistry(
      inbox ? inboxTap(broker, inbox.received) : broker,
      this.head,
      () => this.newId(),
      (err, topic) => logger.warn({ err, topic }, 'broker error on a topic'),
    );
    this.topicEnds = {
      registry: this.registry,
      lifecycle: () => this.lifecycle,
      budget: () => this.outputBudget,
    };
  }

  /** Register the subscribe and unsubscribe methods on a registry. */
  install(registry: MethodRegistry<Session<C>>): void {
    registry.method(this.methods.subscribe, (params, ctx) => this.subscribe(params, ctx));
    registry.method(this.methods.unsubscribe, (params, ctx) =>
      this.unsubscribe(ctx.session, readUnsubscribeParams(params)),
    );
    registry.method(this.methods.history ?? 'topic.history', (params, ctx) =>
      this.history(params, ctx),
    );
  }

  /**
   * Declare a topic clients may subscribe to: an exact name (`prices.BTC`) or a
   * prefix ending in `*` (`chat.*`). Subscribing to an undeclared topic is rejected.
   * Throws as `checkTopicDeclaration` does, and an Error for a name already declared as a
   * topic or as a stream.
   */
  topic(pattern: string, options: TopicOptions<C> = {}): void {
    this.checkDeclarable(pattern, options, false);
    const definition = {
      pattern,
      options,
      flow: { ...defaultFlowControl, ...options },
      retention: { ...defaultRetention, ...options.history },
    };
    this.definitions.set(pattern, definition);
    if (pattern.endsWith('*')) {
      this.prefixes.push(definition);
      // Longest prefix first, so the most specific declaration wins.
      this.prefixes.sort((a, b) => b.pattern.length - a.pattern.length);
    }
  }

  /**
   * Throw as `topic(name, options)` (or, `asStream`, `stream(name, ...)`) would for a name already
   * declared or a reserved one, declaring nothing: so that implementContract can check every name
   * before it registers any (the options themselves: checkTopicDeclaration).
   */
  checkDeclarable(name: string, options: TopicOptions<C> | undefined, asStream: boolean): void {
    if (asStream) {
      if (this.streams.has(name)) throw new Error(`Stream "${name}" is already declared`);
      // A subscribe finds the stream first: the topic's subscribers would get the stream instead.
      if (this.definitions.has(name)) {
        throw new Error(
          `Stream "${name}" is already declared as a topic: a name is a topic or a stream, not both`,
        );
      }
      return;
    }
    if (this.definitions.has(name)) throw new Error(`Topic "${name}" is already declared`);
    // A subscribe finds the stream first: the topic would never have a subscriber.
    if (this.streams.has(name)) {
      throw new Error(
        `Topic "${name}" is already declared as a stream: a name is a topic or a stream, not both`,
      );
    }
    if (name.startsWith('$') || name.startsWith(INBOX_TOPIC_PREFIX))
      throw new Error(
        `Topic names starting with "$" or "${INBOX_TOPIC_PREFIX}" are reserved: "${name}"`,
      );
  }

  /**
   * Declare a per-subscriber stream: `handler` builds an Observable for each subscriber.
   * Throws as `checkStreamDeclaration` does, and an Error for a name already declared as a
   * stream or as a topic.
   */
  stream<P, T>(
    name: string,
    handler: StreamHandler<C, P, T>,
    flow: Partial<FlowControl> = {},
  ): void {
    checkStreamDeclaration(name, handler, flow);
    this.checkDeclarable(name, undefined, true);
    this.streams.set(name, {
      handler: handler as StreamHandler<C>,
      flow: { ...defaultFlowControl, ...flow },
    });
  }

  /**
   * Publish to a topic through the broker; resolves with the message's sequence number. With
   * `except`, those sessions' subscriptions pass the message by on every node.
   */
  publish(topic: string, data: unknown, options?: PublishOptions): Promise<number> {
    let payload: string;
    let except: readonly string[] | undefined;
    try {
      if (!isWellFormed(topic)) {
        // Sent as UTF-8, it would land on the topic of its U+FFFD twin.
        throw new TypeError('Topic name is not well-formed Unicode (a lone surrogate)');
      }
      except = exceptList(options?.except);
      payload = JSON.stringify(data === undefined ? null : data);
      assertEncodable(payload, 'data');
    } catch (err) {
      return Promise.reject(err as Error);
    }
    const retention = this.resolveTopic(topic)?.retention ?? defaultRetention;
    // A JsonRpcError, so a handler that returns this promise answers its caller precisely.
    return this.broker.publish(topic, payload, retention, except).catch((err: unknown) => {
      if (err instanceof TopicCreationLimitError) {
        throw new ServerError(
          ErrorCode.RateLimited,
          'Too many new topics: the message was not published',
          { topic, newTopicsPerSecond: err.perSecond },
        );
      }
      throw this.publishFailed(err, topic);
    });
  }

  /**
   * Publish once per idempotency `key` within `windowMs` (Broker.publishOnce): a retry with the
   * key resolves with the first publish's seq and `duplicate: true`, publishing nothing. Rejects
   * like `publish`, and with -32602 when the broker takes no idempotency keys.
   */
  publishOnce(
    topic: string,
    data: unknown,
    key: string,
    windowMs: number,
  ): Promise<{ seq: number; duplicate: boolean }> {
    const broker = this.broker;
    if (!broker.publishOnce) {
      return Promise.reject(
        new ServerError(ErrorCode.InvalidParams, 'This broker takes no idempotency keys', {
          field: 'idempotencyKey',
          topic,
        }),
      );
    }
    let payload: string;
    try {
      if (!isWellFormed(topic))
        throw new TypeError('Topic name is not well-formed Unicode (a lone surrogate)');
      payload = JSON.stringify(data === undefined ? null : data);
      assertEncodable(payload, 'data');
    } catch (err) {
      return Promise.reject(err as Error);
    }
    const retention = this.resolveTopic(topic)?.retention ?? defaultRetention;
    return Promise.resolve()
      .then(() => broker.publishOnce!(topic, payload, key, windowMs, retention))
      .catch((err: unknown) => {
        if (err instanceof TopicCreationLimitError) {
          throw new ServerError(
            ErrorCode.RateLimited,
            'Too many new topics: the message was not published',
            {
              topic,
              newTopicsPerSecond: err.perSecond,
            },
          );
        }
        throw this.publishFailed(err, topic);
      });
  }

  /** Publish every value of `source` to `topic`; unsubscribe the result to stop. */
  publishFrom(
    topic: string,
    source: Observable<unknown>,
    options: PublishFromOptions = {},
  ): Subscription {
    const { onError } = options;
    return source.subscribe({
      next: (value) =>
        void this.publish(topic, value).catch((err: unknown) => {
          if (onError) return reportTo(onError, err, value, this.logger, topic);
          // A broker failure was logged, with its cause, by publish.
          if (!(err instanceof ServerError && err.code === ErrorCode.BrokerUnavailable))
            this.logger.warn({ err, topic }, 'publish failed');
        }),
      error: (err: unknown) => this.logger.warn({ err, topic }, 'published source failed'),
    });
  }

  /** Local subscriptions counted by declared topic (`room.*`, not each room): bounded by the declarations. */
  subscriptionsByPattern(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [topic, count] of Object.entries(this.registry.snapshot())) {
      // Every user's inbox under one label: the label's values stay as few as the declarations.
      const pattern = topic.startsWith(INBOX_TOPIC_PREFIX)
        ? INBOX_SUBSCRIPTION
        : this.resolveTopic(topic)?.pattern;
      if (pattern !== undefined) out[pattern] = (out[pattern] ?? 0) + count;
    }
    return out;
  }

  /**
   * -32009 for a publish the broker did not confirm: "the message was not published" when it
   * never reached the broker, "the message may have been published" when it was sent and its
   * answer was lost (then, if the broker stored it, subscribers get it with its seq).
   */
  private publishFailed(err: unknown, topic: string): ServerError {
    const what =
      err instanceof PublishUnconfirmedError
        ? 'the message may have been published'
        : 'the message was not published';
    return this.brokerUnavailable(err, topic, what);
  }

  /**
   * -32009 for a broker operation that failed (the broker is down or refused). The cause
   * (which may name the broker's host and port) goes to the log, and to the client only with
   * `exposeErrorDetails`.
   */
  private brokerUnavailable(err: unknown, topic: string, what: string): ServerError {
    return brokerUnavailable(this.logger, this.exposeErrorDetails, err, what, { topic });
  }

  /**
   * Keep `topic` subscribed on the broker through the node's registry, without a subscriber
   * (the session router's hold on a user's inbox). Rejects when the broker refuses.
   */
  holdTopic(topic: string): Promise<void> {
    return this.registry.hold(topic);
  }

  /** Undo one successful `holdTopic`. */
  releaseTopic(topic: string): void {
    this.registry.release(topic);
  }

  /** Local subscriber counts by topic; empty when nobody is subscribed. */
  topics(): Record<string, number> {
    return this.registry.snapshot();
  }

  /** Subscriptions (topic and stream) open on one session. */
  subscriptionCount(session: Session<C>): number {
    return this.tables.get(session)?.subscriptions.size ?? 0;
  }

  /** What the session's subscriptions hold back during replays, once they have held any. */
  heldOutputOf(session: Session<C>): HeldOutput | undefined {
    return this.tables.get(session)?.held;
  }

  /** Release everything a closed session held. */
  detach(session: Session<C>): void {
    const table = this.tables.get(session);
    if (!table) return;
    this.tables.delete(session);
    this.heldHistory.get(table)?.clear();
    if (table.newTopics instanceof PairedBucket) {
      this.newTopicAddresses?.release(table.newTopics.address);
    }
    for (const subscription of table.subscriptions.values()) subscription.teardown();
    table.subscriptions.clear();
    // Each teardown released its backlog: the running total is 0 now, and leaves the budget.
    table.held?.leave();
  }

  private async subscribe(
    params: Parameters<typeof readSubscribeParams>[0],
    ctx: HandlerContext<Session<C>>,
  ) {
    const request = readSubscribeParams(params);
    // Sent as a notification there is no reply to carry an id: nothing could ever use it.
    if (ctx.id === undefined) return undefined;
    const session = ctx.session;
    if (!session.transport.canPush) throw pushUnsupported('Subscriptions');
    const table = this.requireTable(session);
    if (request.name === INBOX_SUBSCRIPTION && this.inbox) {
      return this.subscribeInbox(request, session, table, ctx);
    }
    const stream = this.streams.get(request.name);
    if (stream) {
      this.checkLimit(table); // before the handler, so a refused subscribe has no side effects
      const streamCtx = new StreamContext(ctx);
      // Before the handler weighs the topic it stands for (`$presence`), if it does.
      const seen = this.refreshesOf(session);
      try {
        const returned = stream.handler(request.params, streamCtx);
        if (isObservable(returned)) {
          return this.startStream(session, table, returned, stream.flow, ctx, streamCtx);
        }
        const source = pulledSource(await returned, pullGateOf(session), stream.flow.highWaterMark);
        const standsFor = streamCtx.standsFor;
        const weighed: Weighed | undefined = standsFor && {
          seen,
          topic: standsFor.topic,
          again: () => standsFor.mayGoOn(),
        };
        return await this.takeEffect(session, weighed, () => {
          // Cancelled (rpc.cancel) or closed while the handler was building it: never started.
          throwIfCancelled(ctx);
          const current = this.requireTable(session);
          return this.startStream(session, current, source, stream.flow, ctx, streamCtx);
        });
      } catch (err) {
        streamCtx.end();
        throw err;
      }
    }
    this.checkTopicName(request.name);
    const definition = this.resolveTopic(request.name);
    if (!definition) throw new InvalidParamsError('Unknown topic', { topic: request.name });
    const weighed = this.weighing(session, request.name, () =>
      this.mayUseTopic(session, request.name, definition, request.params, true),
    );
    const allowed = await this.mayUseTopic(session, request.name, definition, request.params);
    throwIfCancelled(ctx);
    if (!allowed) throw notAuthorized(request.name);
    return this.holdAndStart(request.name, request.name, session, table, definition.flow, ctx, {
      request,
      kept: keptParams(definition, request.params),
      weighed,
    });
  }

  /**
   * The `history` method (pubsub-history.ts): the topic checked and authorized as a subscribe
   * is (-32602 unknown, -32004 refused), then read holding one of the connection's read slots,
   * its page counted in what the connection holds (HeldHistory) until its reply has gone.
   */
  private async history(params: unknown, ctx: HandlerContext<Session<C>>): Promise<HistoryPage> {
    const session = ctx.session;
    // No call of the connection runs (this one counts from its first await): a batch's reply
    // waits for a running member, so no reply is left for a page still counted to wait in.
    // Asked now, before this call awaits and others may start.
    if (session.peer.inFlightCount === 0) this.forgetHeldHistory(session);
    const request = readHistoryParams(params);
    this.checkTopicName(request.topic);
    const definition = this.resolveTopic(request.topic);
    if (!definition) throw new InvalidParamsError('Unknown topic', { topic: request.topic });
    const weighed = this.weighing(session, request.topic, () =>
      this.mayUseTopic(session, request.topic, definition, undefined, true),
    );
    const allowed = await this.mayUseTopic(session, request.topic, definition, undefined);
    throwIfCancelled(ctx);
    if (!allowed) throw notAuthorized(request.topic);
    const table = this.requireTable(session);
    const hold = this.heldHistoryOf(session, table).forCall();
    try {
      const page = await readTopicHistory(
        this.historyReads,
        this.historySlotsOf(table),
        request,
        ctx.signal,
        hold,
      ).catch((err: unknown) => {
        throwIfCancelled(ctx);
        if (err instanceof HeldHistoryRefusal) throw err;
        throw this.brokerUnavailable(err, request.topic, 'history was not read');
      });
      // The page is the call's effect: a refresh since the check weighs it as it would a subscribe.
      const answer = await this.takeEffect(session, weighed, () => page);
      ctx.afterReply(hold.release);
      return answer;
    } catch (err) {
      hold.release();
      throw err;
    }
  }

  /** What `table`'s connection holds of history pages, made on its first read. */
  private heldHistoryOf(session: Session<C>, table: SessionTable): HeldHistory {
    let held = this.heldHistory.get(table);
    if (!held) {
      const group = addressGroupOf(session.transport.kind, session.remoteAddress);
      held = new HeldHistory(this.heldHistoryByAddress, group);
      this.heldHistory.set(table, held);
    }
    return held;
  }

  /** Forget the history pages `session` holds: no reply they waited in is left. */
  private forgetHeldHistory(session: Session<C>): void {
    const table = this.tables.get(session);
    if (table) this.heldHistory.get(table)?.clear();
  }

  /** The session's claims (`topicsOf`), then the topic's own `authorize`: both must allow. */
  /** The declared pattern `name` falls under (`room.*`); undefined when none. */
  topicPattern(name: string): string | undefined {
    return this.resolveTopic(name)?.pattern;
  }

  /**
   * Whether `session` may subscribe to `topic`: declared, its claims, the topic's authorize.
   * `refresh`: a re-check at a refresh (see mayUseTopic).
   */
  mayUse(session: Session<C>, topic: string, params: unknown, refresh = false): Promise<boolean> {
    const definition = this.resolveTopic(topic);
    return definition
      ? this.mayUseTopic(session, topic, definition, params, refresh)
      : Promise.resolve(false);
  }

  /** Run `onTopicSubscribed` for a subscription that just started, and its end when it ends. */
  private watchTopicSubscription(
    session: Session<C>,
    topic: string,
    id: string,
    table: SessionTable,
  ): void {
    const subscription = table.subscriptions.get(id);
    if (!(subscription instanceof TopicSubscription)) return;
    subscription.ended = this.onTopicSubscribed?.(session, topic);
  }

  /**
   * The session's claims (`topicsOf`), then the topic's `authorize`. `refresh`: a re-check of a
   * subscription at a refresh, told to `authorize` (`refresh: true`): a hook with shares (the
   * subscribe hook) waits for them rather than refuse it busy, which would end a subscription
   * the new context may still allow.
   */
  private async mayUseTopic(
    session: Session<C>,
    topic: string,
    definition: TopicDefinition<C>,
    params: unknown,
    refresh = false,
  ): Promise<boolean> {
    if (!claimsAllow(this.topicsOf, session.context, topic, session.logger, 'topicsOf')) {
      return false;
    }
    const { authorize } = definition.options;
    if (!authorize) return true;
    return authorize(refresh ? { session, topic, params, refresh } : { session, topic, params });
  }

  /**
   * Server-side membership (src/server/membership.ts): subscribe `session` to `topic` as its
   * own subscribe would (same checks, limits and frames; `since` replays after that message,
   * else it starts at the topic's position). `announce` runs with the id right before the
   * subscription's first frame. A session already subscribed to the topic keeps that
   * subscription: its id is returned and nothing is sent.
   */
  async joinTopic(
    session: Session<C>,
    topic: string,
    since: number | undefined,
    announce: (id: string) => void,
  ): Promise<string> {
    if (!session.transport.canPush) throw pushUnsupported('Server-side joins');
    const existing = this.subscriptionTo(session, topic);
    if (existing !== undefined) return existing;
    this.checkTopicName(topic);
    const definition = this.resolveTopic(topic);
    if (!definition) throw new InvalidParamsError('Unknown topic', { topic });
    const weighed = this.weighing(session, topic, () =>
      this.mayUseTopic(session, topic, definition, undefined, true),
    );
    const allowed = await this.mayUseTopic(session, topic, definition, undefined);
    if (!allowed) throw notAuthorized(topic);
    const table = this.requireTable(session);
    let start: (() => void) | undefined;
    const ctx: TopicContext = {
      signal: new AbortController().signal,
      afterReply: (hook) => (start = hook),
    };
    const request: SubscribeRequest = {
      name: topic,
      params: undefined,
      since,
      epoch: undefined,
      position: since === undefined,
    };
    const id = await this.holdAndStart(topic, topic, session, table, definition.flow, ctx, {
      request,
      weighed,
    });
    if (table.subscriptions.has(id)) {
      announce(id);
      start?.();
    }
    return id;
  }

  /** The id of a subscription of `session` to `topic` (the first), if it has one. */
  subscriptionTo(session: Session<C>, topic: string): string | undefined {
    for (const [id, subscription] of this.tables.get(session)?.subscriptions ?? []) {
      if (subscription.topic === topic && !topic.startsWith(INBOX_TOPIC_PREFIX)) return id;
    }
    return undefined;
  }

  /**
   * Server-side membership: end every subscription of `session` to `topic` (joined or its
   * own) with the stream-end frame `complete`. False when it had none.
   */
  leaveTopic(session: Session<C>, topic: string): boolean {
    const table = this.tables.get(session);
    if (!table || topic.startsWith(INBOX_TOPIC_PREFIX)) return false;
    let left = false;
    for (const [id, subscription] of [...table.subscriptions]) {
      if (subscription.topic !== topic) continue;
      table.subscriptions.delete(id);
      subscription.delivery.finish(finalTail());
      subscription.teardown();
      left = true;
    }
    return left;
  }

  /**
   * After the session's context was replaced (a refresh): each topic subscription is weighed
   * again (claims, then the topic's `authorize`), and each one no longer allowed ends with the
   * stream-end error frame (-32004). So is a stream that stands for a topic (`$presence`, its
   * `standsFor`); other streams and `$inbox` are not topics the claims name.
   */
  async reauthorize(session: Session<C>): Promise<void> {
    // In the turn the table is read: a call under way that weighed the old context has either
    // taken effect (it is in the table, weighed below) or sees this when it does (takeEffect).
    this.refreshes.set(session, this.refreshesOf(session) + 1);
    const table = this.tables.get(session);
    if (!table) return;
    const checks = [...table.subscriptions].map(async ([id, subscription]) => {
      const { standsFor } = subscription;
      const topic = standsFor?.topic ?? subscription.topic;
      const definition = topic === undefined ? undefined : this.resolveTopic(topic);
      if (topic === undefined || !definition) return;
      let allowed: boolean;
      try {
        allowed = standsFor
          ? await standsFor.mayGoOn()
          : await this.mayGoOn(session, topic, definition, subscription);
      } catch (err) {
        session.logger.error({ err, topic }, 'topic authorize hook failed: subscription ended');
        allowed = false;
      }
      if (allowed || table.subscriptions.get(id) !== subscription) return;
      table.subscriptions.delete(id);
      const error = new ServerError(ErrorCode.Unauthorized, 'No longer authorized for this topic', {
        topic,
      });
      // Held since an expiry (Session.holdOutput): published while no identity allowed it, and
      // the new one does not either, so none of it goes; the end frame does.
      session.discardHeld(subscription.delivery);
      subscription.delivery.finish(finalTail(error.toErrorObject()));
      subscription.teardown();
      session.logger.info({ topic, subscription: id }, 'subscription ended: no longer authorized');
    });
    await Promise.all(checks);
  }

  /**
   * Whether a topic subscription may go on at a refresh under `definition`, the one its topic
   * resolves to then. That can be a definition declared after the subscribe (an exact topic
   * wins over a prefix, a longer prefix over a shorter one), so its `authorize` is asked with
   * the params the client sent: the kept ones, or none when the subscribe carried none. A
   * subscribe whose params were not kept (its own definition had no `authorize`) cannot give
   * them, and its subscription ends rather than be weighed on params it never sent. The
   * `authorize` request carries `refresh: true`.
   */
  private mayGoOn(
    session: Session<C>,
    topic: string,
    definition: TopicDefinition<C>,
    subscription: SessionSubscription,
  ): Promise<boolean> {
    const known = !(subscription instanceof TopicSubscription) || subscription.paramsKnown;
    return this.mayGoOnWith(session, topic, definition, subscription.params, known);
  }

  /**
   * mayGoOn for a stream that stands for `topic` (`$presence`) and kept `kept` of its
   * subscribe's params (keptParamsFor): weighed under the definition `topic` resolves to now.
   */
  mayGoOnKept(session: Session<C>, topic: string, kept: KeptParams): Promise<boolean> {
    const definition = this.resolveTopic(topic);
    if (!definition) return Promise.resolve(false);
    const params = typeof kept === 'string' ? (JSON.parse(kept) as unknown) : undefined;
    return this.mayGoOnWith(session, topic, definition, params, kept !== PARAMS_NOT_KEPT);
  }

  /** What a subscription to `topic` keeps of its subscribe's `params` (keptParams). */
  keptParamsFor(topic: string, params: unknown): KeptParams {
    const definition = this.resolveTopic(topic);
    return definition ? keptParams(definition, params) : PARAMS_NOT_KEPT;
  }

  private mayGoOnWith(
    session: Session<C>,
    topic: string,
    definition: TopicDefinition<C>,
    params: unknown,
    paramsKnown: boolean,
  ): Promise<boolean> {
    if (definition.options.authorize && !paramsKnown) {
      session.logger.info(
        { topic, pattern: definition.pattern },
        "topic authorize not asked: the subscription's params were not kept",
      );
      return Promise.resolve(false);
    }
    return this.mayUseTopic(session, topic, definition, params, true);
  }

  /**
   * `$inbox`: the topic of the session's own user's inbox, with everything a topic has
   * (position, resume, gap and epoch signals). Needs a session with a user.
   */
  private subscribeInbox(
    request: SubscribeRequest,
    session: Session<C>,
    table: SessionTable,
    ctx: HandlerContext<Session<C>>,
  ): Promise<string> {
    const user = session.user;
    const inbox = session.inbox;
    if (user === undefined || !inbox) {
      throw new ServerError(
        ErrorCode.Unauthorized,
        'The inbox is for sessions of a user: this session has none',
        { topic: INBOX_SUBSCRIPTION },
      );
    }
    // From here the session gets no plain copies of its user's messages (SessionInbox), unless
    // this subscribe fails: then they come back to it.
    inbox.claim();
    return this.holdAndStart(inboxTopic(user), request.name, session, table, INBOX_FLOW, ctx, {
      request,
      starting: (asked) => inbox.started(asked),
    }).then(
      (id) => {
        inbox.confirmed();
        return id;
      },
      (err: unknown) => {
        inbox.failed();
        throw err;
      },
    );
  }

  /** Hold `topic` on the broker, then start the subscription (`name` is what the client asked for). */
  private async holdAndStart(
    topic: string,
    name: string,
    session: Session<C>,
    table: SessionTable,
    flow: FlowControl,
    ctx: TopicContext,
    start: TopicStart,
  ): Promise<string> {
    this.checkLimit(table);
    const bytes = topicBytesOf(topic, start.kept);
    this.reserveTopicBytes(table, bytes, typeof start.kept === 'string');
    try {
      this.checkNewTopic(topic, session, table);
    } catch (err) {
      table.topicBytes -= bytes;
      throw err;
    }
    try {
      await this.registry.hold(topic);
    } catch (err) {
      table.topicBytes -= bytes;
      // The broker is down: worth retrying (-32009), unlike an Internal error.
      throw this.brokerUnavailable(err, name, 'could not subscribe');
    }
    let started: ReturnType<typeof this.startTopic>;
    try {
      started = await this.takeEffect(session, start.weighed, () => {
        // The connection closed while the broker was subscribing.
        if (this.tables.get(session) !== table) throw new ConnectionClosedError();
        // Cancelled while the broker was subscribing: the caller is answered -32001, so nothing
        // may stay behind.
        throwIfCancelled(ctx);
        const made = this.startTopic(topic, table, flow, ctx, start);
        this.watchTopicSubscription(session, topic, made.id, table);
        return made;
      });
    } catch (err) {
      // Refused by a refresh, closed, cancelled, or another subscribe took the last slot while
      // the broker was subscribing.
      table.topicBytes -= bytes;
      this.registry.release(topic);
      throw err;
    }
    const { id, subscription, placed } = started;
    if (!placed) return id;
    // The reply waits for the position or the latest value, so that the two leave in one write:
    // a client that has the reply has where it starts, rather than a connection lost between
    // the two frames.
    try {
      await placed;
    } catch (err) {
      // The position or the latest value could not be read: refused (-32009, worth retrying)
      // rather than started without it (a subscriber would take no latest value for a topic
      // with no message, and one without its position could not check continuity).
      if (table.subscriptions.get(id) === subscription) {
        table.subscriptions.delete(id);
        subscription.teardown();
      }
      throw this.brokerUnavailable(err, name, `could not read ${started.reading}`);
    }
    // A subscription ended meanwhile (a refresh refused it, the server made the session leave
    // the topic) has sent its end frame: the reply names it and the client ends it. One whose
    // call was cancelled is answered -32001 by the peer, so it may not stay behind.
    if (ctx.signal.aborted && table.subscriptions.get(id) === subscription) {
      table.subscriptions.delete(id);
      subscription.teardown();
    }
    throwIfCancelled(ctx);
    if (this.tables.get(session) !== table) throw new ConnectionClosedError();
    return id;
  }

  /** Refreshes `session` has had (see `refreshes`). */
  private refreshesOf(session: Session<C>): number {
    return this.refreshes.get(session) ?? 0;
  }

  /**
   * What a call that is about to weigh `topic` keeps to weigh it again (`again`, as a refresh's
   * re-check) should a refresh land before it takes effect. Taken before the first check reads
   * the session's identity.
   */
  private weighing(session: Session<C>, topic: string, again: () => Promise<boolean>): Weighed {
    return { seen: this.refreshesOf(session), topic, again };
  }

  /**
   * Run `effect` (start a subscription, answer a read) once the topic is allowed by the identity
   * in force: when refreshes landed since `weighed` was taken (a refresh's `reauthorize` weighs
   * only what the session's table holds, not a call still awaiting), `again` is asked under the
   * current identity, as often as refreshes land during the asking. `effect` runs in the turn of
   * the last comparison, so no refresh falls between the check and the effect; a refusal is
   * -32004 and `effect` never runs. No `weighed`: nothing to weigh (`$inbox`, plain streams).
   */
  private async takeEffect<T>(
    session: Session<C>,
    weighed: Weighed | undefined,
    effect: () => T,
  ): Promise<T> {
    while (weighed && weighed.seen !== this.refreshesOf(session)) {
      weighed.seen = this.refreshesOf(session);
      if (!(await weighed.again())) throw notAuthorized(weighed.topic);
    }
    return effect();
  }

  /**
   * Make the subscription and settle where it starts, in the turn it is made. One that says
   * where it starts (`since`, `position`, `$inbox`'s own start, or a latest-value topic's last
   * message) joins the topic now, its live messages held; a position or a latest value is read
   * now, and `placed` settles once it is known, so the reply can wait for it and go out with it.
   * Any other subscription joins once its reply has gone.
   */
  private startTopic(
    topic: string,
    table: SessionTable,
    flow: FlowControl,
    ctx: TopicContext,
    { request, starting, kept }: TopicStart,
  ): {
    id: string;
    subscription: TopicSubscription<C>;
    placed?: Promise<unknown>;
    /** What `placed` reads, as a refusal names it. */
    reading?: string;
  } {
    this.checkLimit(table);
    // Sharing the topic's id lets one encoded frame serve every such subscriber.
    const sharedId = this.registry.sharedId(topic);
    const id =
      sharedId !== undefined && !table.subscriptions.has(sharedId) ? sharedId : this.newId();
    // The table's sink is its session (requireTable).
    const session = table.sink as Session<C>;
    const subscription = new TopicSubscription<C>(
      topic,
      kept,
      this.routeOf(flow),
      this.registry.quotedId(topic, id),
      table,
    );
    table.subscriptions.set(id, subscription);
    const { since, epoch, position = false } = starting ? starting(request) : request;
    subscription.resumable = since !== undefined || position;
    subscription.clientEpoch = epoch;
    // A new subscriber of a latest-value topic gets its last message first, read before the
    // reply; one that asked for its position is told the seq before that message.
    const latestFirst =
      since === undefined &&
      starting === undefined &&
      this.resolveTopic(topic)?.options.latestValue === true;
    // Where it starts is settled in the turn it joins the topic: no message falls between.
    const joinsNow = since !== undefined || position || starting !== undefined || latestFirst;
    let placement: Placement | undefined;
    let latest: LatestValue;
    let placed: Promise<unknown> | undefined;
    const reads = { reads: this.historyReads, slots: this.historySlotsOf(table) };
    if (since === undefined && position && !latestFirst) {
      placed = readPosition(this.broker, topic, subscription, reads).then(
        (read) => (placement = read),
      );
    } else if (latestFirst) {
      placed = readLatestValue(this.broker, topic, subscription, reads).then(
        (read) => (latest = read),
      );
    } else if (joinsNow) subscription.pauseForReplay(since);
    if (joinsNow) this.registry.attach(topic, subscription);
    ctx.afterReply(() => {
      if (table.subscriptions.get(id) !== subscription) return;
      if (since !== undefined) {
        replay(this.broker, this.logger, topic, since, epoch, subscription, {
          reads: this.historyReads,
          slots: this.historySlotsOf(table),
          drains: (table.drains ??= new DrainWaiters(session)),
        });
      } else if (latestFirst) sendLatestValue(this.broker, subscription, latest, position);
      else if (placed) tellPosition(subscription, placement);
      else if (joinsNow) subscription.resume(0, [], 0);
      else this.registry.attach(topic, subscription);
      subscription.started = true;
      this.lifecycle?.subscribed(session, topic);
    });
    if (!placed) return { id, subscription };
    return { id, subscription, placed, reading: latestFirst ? 'the latest value' : 'the position' };
  }

  private startStream(
    session: Session<C>,
    table: SessionTable,
    source: Observable<unknown>,
    flow: FlowControl,
    ctx: HandlerContext<Session<C>>,
    streamCtx: StreamContext<Session<C>>,
  ): string {
    this.checkLimit(table);
    const id = this.newId();
    const delivery = this.newDelivery(table.sink, JSON.stringify(id), flow);
    attachStream({
      session,
      table,
      id,
      delivery,
      source,
      ctx,
      exposeErrorDetails: this.exposeErrorDetails,
      onEnd: () => streamCtx.end(),
      standsFor: streamCtx.standsFor,
    });
    return id;
  }

  private unsubscribe(session: Session<C>, id: string): boolean {
    const table = this.tables.get(session);
    const subscription = table?.subscriptions.get(id);
    if (!table || !subscription) return false;
    table.subscriptions.delete(id);
    subscription.teardown();
    return true;
  }

  /**
   * A stream's delivery (a topic subscription is its own: TopicSubscription). `quotedId`: the
   * subscription id JSON-quoted.
   */
  private newDelivery(sink: Sink, quotedId: string, flow: FlowControl): Delivery {
    return new Delivery(sink, this.routeOf(flow), quotedId);
  }

  /**
   * The route every delivery of a topic (or stream) shares: one per FlowControl, which each
   * definition makes once. A stream's deliveries ignore its `ends`.
   */
  private routeOf(flow: FlowControl): TopicRoute<C> {
    let route = this.routes.get(flow);
    if (!route) {
      route = {
        head: this.head,
        flow,
        onSlowConsumer: this.countSlowConsumer,
        ends: this.topicEnds,
      };
      this.routes.set(flow, route);
    }
    return route;
  }

  private readonly routes = new WeakMap<FlowControl, TopicRoute<C>>();

  /** Every delivery's slow-consumer counter (one function for all of them). */
  private readonly countSlowConsumer = (event: 'dropped' | 'disconnected'): void => {
    if (event === 'disconnected') this.stats.slowConsumerDisconnects++;
    else this.stats.dropped++;
  };

  private resolveTopic(name: string): TopicDefinition<C> | undefined {
    // "$node.*" and "$user.*" carry messages addressed to sessions, "~inbox.*" a user's own
    // (reached as "$inbox"): never subscribable by name.
    if (name.startsWith('$') || name.startsWith(INBOX_TOPIC_PREFIX)) return undefined;
    const exact = this.definitions.get(name);
    if (exact && !exact.pattern.endsWith('*')) return exact;
    return this.prefixes.find((d) => name.startsWith(d.pattern.slice(0, -1)));
  }

  /** The session's subscriptions, made on its first subscribe; throws once it has closed. */
  private requireTable(session: Session<C>): SessionTable {
    if (session.isClosed) throw new ConnectionClosedError();
    let table = this.tables.get(session);
    if (!table) {
      table = {
        sink: session,
        subscriptions: new CompactMap(),
        topicBytes: 0,
        historySlots: undefined,
        drains: undefined,
        newTopics: undefined,
        held: undefined,
      };
      this.tables.set(session, table);
    }
    return table;
  }

  /** The connection's history read slots, made on its first read. */
  private historySlotsOf(table: SessionTable): Slots {
    return (table.historySlots ??= new Slots(this.limits.maxHistoryReadsPerConnection));
  }

  private checkLimit(table: SessionTable): void {
    if (table.subscriptions.size >= this.limits.maxSubscriptions) {
      throw new ServerError(ErrorCode.TooManySubscriptions, 'Too many subscriptions', {
        limit: this.limits.maxSubscriptions,
      });
    }
  }

  /**
   * A topic name is kept for as long as its subscription lives (by this node, and by the
   * broker): one longer than `maxTopicNameBytes` is refused before anything holds it, and
   * without echoing it back. Also asked for the topic a `$presence` subscription names.
   */
  checkTopicName(name: string): void {
    const limit = this.limits.maxTopicNameBytes;
    // At least one byte per UTF-16 unit, at most three: most names need no count.
    if (name.length * 3 > limit) {
      const bytes = Buffer.byteLength(name, 'utf8');
      if (bytes > limit) {
        throw new InvalidParamsError(
          `Topic name too long: ${bytes} bytes (UTF-8), at most ${limit} (limits.maxTopicNameBytes)`,
          { limit, bytes },
        );
      }
    }
    if (!isWellFormed(name)) {
      // A lone surrogate becomes U+FFFD on the way to Redis or NATS (UTF-8): two names would
      // meet on one broker topic.
      throw new InvalidParamsError('Topic name is not well-formed Unicode (a lone surrogate)');
    }
  }

  /**
   * A per-subscriber stream that holds a topic's name on this node and the broker (`$presence`,
   * on the topic's `$presence.<topic>` channel), weighed as a subscribe to the topic is: the name
   * is counted against the connection's `maxTopicBytesPerConnection`, and when `fresh` (this
   * node does not hold that channel yet) the subscribe takes from the connection's new-topic
   * rate. The name has passed `checkTopicName`. Returns the release, run when the stream ends
   * (more than once is harmless).
   */
  reserveStreamTopic(
    session: Session<C>,
    topic: string,
    fresh: boolean,
    kept: KeptParams = undefined,
  ): () => void {
    const table = this.requireTable(session);
    const bytes = topicBytesOf(topic, kept);
    this.reserveTopicBytes(table, bytes, typeof kept === 'string');
    if (fresh) {
      try {
        this.takeNewTopic(topic, session, table);
      } catch (err) {
        table.topicBytes -= bytes;
        throw err;
      }
    }
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      table.topicBytes -= bytes;
    };
  }

  /**
   * Count `bytes` more of topic names (and of the params kept for them) against the
   * connection's bound, or refuse (-32005). `withParams`: this subscribe's bytes include kept
   * params.
   */
  private reserveTopicBytes(table: SessionTable, bytes: number, withParams: boolean): void {
    const limit = this.limits.maxTopicBytesPerConnection;
    const total = table.topicBytes + bytes;
    if (total > limit) {
      // Which is counted is only looked up on a refusal: the message names what the bytes are.
      const what =
        withParams ||
        [...table.subscriptions.values()].some(
          (held) => held instanceof TopicSubscription && held.keepsParams,
        )
          ? 'topic names and the params kept for them'
          : 'topic names';
      throw new ServerError(
        ErrorCode.TooManySubscriptions,
        `Too many subscriptions: their ${what} would take ${total} bytes, at most ${limit} (limits.maxTopicBytesPerConnection)`,
        { limit, bytes: total },
      );
    }
    table.topicBytes = total;
  }

  /**
   * A subscribe to a topic this node does not hold yet subscribes it on the broker (an
   * ordered consumer on NATS, a channel and a read on Redis): at most `newTopicSubscribesPerSecond`
   * per connection (burst `newTopicSubscribesBurst`) and `newTopicSubscribesPerSecondPerIp` per
   * address group (burst `newTopicSubscribesBurstPerIp`), beyond which -32003; and none while the
   * node holds `maxTopics` (-32000).
   */
  private checkNewTopic(topic: string, session: Session<C>, table: SessionTable): void {
    if (this.registry.sharedId(topic) === undefined) this.takeNewTopic(topic, session, table);
  }

  /**
   * Take one of the connection's and its address's new-topic subscribes, or refuse: -32000 while
   * the node holds `maxTopics` (asked first, so a refusal for it spends no rate), else -32003.
   */
  private takeNewTopic(topic: string, session: Session<C>, table: SessionTable): void {
    const held = this.topicsHeld();
    // A user's inbox is the gateway's own hold (the session router's), never refused for it.
    if (held >= this.limits.maxTopics && !topic.startsWith(INBOX_TOPIC_PREFIX)) {
      throw new ServerError(
        ErrorCode.ServerBusy,
        `Server busy: this node holds ${held} topics, at most ${this.limits.maxTopics} (limits.maxTopics)`,
        { topic, maxTopics: this.limits.maxTopics },
      );
    }
    let bucket = table.newTopics;
    if (bucket === undefined) {
      if (this.newTopicLimit === undefined && this.newTopicAddresses === undefined) return;
      bucket = table.newTopics = this.newTopicBucket(session, table);
    }
    const empty =
      bucket instanceof PairedBucket ? bucket.takeBoth() : bucket.take() ? undefined : 'connection';
    if (empty === undefined) return;
    const { newTopicSubscribesPerSecond, newTopicSubscribesPerSecondPerIp } = this.limits;
    if (empty === 'connection') {
      throw new ServerError(
        ErrorCode.RateLimited,
        'Rate limited: this connection subscribes to new topics too fast (limits.newTopicSubscribesPerSecond)',
        { topic, limit: newTopicSubscribesPerSecond },
      );
    }
    throw new ServerError(
      ErrorCode.RateLimited,
      'Rate limited: connections from this address subscribe to new topics too fast (limits.newTopicSubscribesPerSecondPerIp)',
      { topic, limit: newTopicSubscribesPerSecondPerIp },
    );
  }

  /**
   * A connection's new-topic bucket, made at its first new-topic subscribe: paired with its
   * address group's, which it holds until it closes (detach), when that budget is on. A table
   * the session no longer has (it closed while the subscribe awaited) takes no address entry:
   * nothing would let go of it.
   */
  private newTopicBucket(session: Session<C>, table: SessionTable): TokenBucket {
    const own = this.newTopicLimit ?? unboundedLimit();
    const addresses = this.newTopicAddresses;
    const group =
      addresses && this.tables.get(session) === table
        ? addressGroupOf(session.transport.kind, session.remoteAddress)
        : undefined;
    const entry: AddressBudget | undefined =
      group === undefined ? undefined : addresses!.acquire(group);
    return entry === undefined ? new TokenBucket(own) : new PairedBucket(own, entry);
  }

  private newId(): string {
    // Hex quantities, as Ethereum nodes use; unique for the life of the gateway.
    return `0x${(++this.nextId).toString(16)}`;
  }
}

/** The gateway limits the pub/sub service reads beyond PubSubLimits (defaults when not given). */
type AddressLimits = Pick<
  Required<GatewayLimits>,
  | 'newTopicSubscribesPerSecondPerIp'
  | 'newTopicSubscribesBurstPerIp'
  | 'maxConnections'
  | 'maxTopics'
>;

/**
 * limits.newTopicSubscribesPerSecondPerIp: a bucket per address group, at most one per
 * connection allowed (maxConnections). Undefined when off (0).
 */
function newTopicAddressesOf(limits: AddressLimits): AddressBudgets | undefined {
  const { newTopicSubscribesPerSecondPerIp: perSecond, newTopicSubscribesBurstPerIp: burst } =
    limits;
  if (perSecond <= 0) return undefined;
  const limit = new RateLimit(perSecond, burst);
  return new AddressBudgets(
    limit,
    limits.maxConnections,
    (group) => new AddressBudget(limit, group),
  );
}

/** What starting a topic subscription needs of its call: a subscribe's, or a server-side join's. */
type TopicContext = Pick<HandlerContext<unknown>, 'signal' | 'afterReply'>;

/** How a topic subscription starts: as the client asked, or as `starting` decides when it joins. */
interface TopicStart {
  request: SubscribeRequest;
  starting?: (request: SubscribeRequest) => SubscribeRequest;
  /** What the subscription holds of the subscribe's params (keptParams). */
  kept?: KeptParams;
  /** The topic check made before the subscribe awaited, asked again after a refresh (takeEffect). */
  weighed?: Weighed;
}

/**
 * A topic check a call made against the session's identity before it awaited: `seen`, the
 * session's refreshes then (PubSubService.refreshes); `again`, the check under the identity in
 * force, as a refresh's re-check (`authorize` is told `refresh: true`).
 */
interface Weighed {
  seen: number;
  readonly topic: string;
  readonly again: () => Promise<boolean>;
}

/** -32004 for a topic the session's identity does not allow. */
function notAuthorized(topic: string): ServerError {
  return new ServerError(ErrorCode.Unauthorized, 'Not authorized for this topic', { topic });
}

/**
 * The params a topic subscription keeps, as JSON: only a topic with `authorize` reads them again
 * (a refresh weighs each subscription anew), so the others keep nothing of them but that there
 * were some (PARAMS_NOT_KEPT: a definition with `authorize` declared later cannot weigh them,
 * see mayGoOn). Kept as text, whose bytes are what the connection's `maxTopicBytesPerConnection`
 * counts, rather than as the parsed value, which can take several times that.
 */
function keptParams<C>(definition: TopicDefinition<C>, params: unknown): KeptParams {
  if (params === undefined) return undefined;
  return definition.options.authorize ? JSON.stringify(params) : PARAMS_NOT_KEPT;
}

/**
 * A call cancelled (rpc.cancel) or whose connection closed while it awaited something: stop
 * before taking anything. The peer answers a cancelled call -32001 whatever is thrown.
 */
function throwIfCancelled(ctx: TopicContext): void {
  if (ctx.signal.aborted) throw new ServerError(ErrorCode.RequestCancelled, 'Request cancelled');
}

/** Options of `gateway.publishFrom`. */
export interface PublishFromOptions {
  /**
   * Called with each value that was not published and why (the broker did not take it, -32009;
   * past `newTopicsPerSecond`, -32003; data JSON cannot carry or nested past MAX_ENCODED_DEPTH),
   * instead of the warning logged without it: the values that reached no subscriber, in order.
   */
  onError?: (err: unknown, value: unknown) => void;
}

/** The application's onError, which must not throw into the publish's promise chain. */
function reportTo(
  onError: (err: unknown, value: unknown) => void,
  err: unknown,
  value: unknown,
  logger: Logger,
  topic: string,
): void {
  try {
    onError(err, value);
  } catch (thrown) {
    logger.warn({ err: thrown, topic }, 'publishFrom onError threw');
  }
}

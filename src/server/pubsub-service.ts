import { isObservable, from } from 'rxjs';
import type { Observable, Subscription } from 'rxjs';
import type { HandlerContext } from '../peer/handler-context.js';
import type { Logger } from '../peer/logger.js';
import type { MethodRegistry } from '../peer/method-registry.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { InvalidParamsError, JsonRpcError, ServerError, toWireError } from '../protocol/errors.js';
import { ConnectionClosedError } from '../protocol/local-errors.js';
import { defaultRetention } from '../pubsub/broker.js';
import type { Broker, Retention } from '../pubsub/broker.js';
import { Delivery, defaultFlowControl } from '../pubsub/delivery.js';
import type { FlowControl } from '../pubsub/delivery.js';
import { finalTail, messageTail, notificationHead } from '../pubsub/frames.js';
import type { Sink } from '../pubsub/sink.js';
import { readSubscribeParams, readUnsubscribeParams } from '../pubsub/subscribe-params.js';
import { TopicRegistry } from '../pubsub/topic-registry.js';
import type { Session } from './session.js';
import { pushUnsupported } from './session.js';

export interface SubscriptionMethods {
  /** Default "subscribe". */
  subscribe: string;
  /** The notification that carries messages. Default "subscription". */
  notification: string;
  /** Default "unsubscribe". */
  unsubscribe: string;
}

export const defaultSubscriptionMethods: SubscriptionMethods = {
  subscribe: 'subscribe',
  notification: 'subscription',
  unsubscribe: 'unsubscribe',
};

export interface TopicOptions<C> extends Partial<FlowControl> {
  /** Decide whether `session` may subscribe; false rejects with -32004 Unauthorized. */
  authorize?: (request: {
    session: Session<C>;
    topic: string;
    params: unknown;
  }) => boolean | Promise<boolean>;
  /** What the broker keeps for clients that resume (default 1 000 messages, 10 minutes). */
  history?: Partial<Retention>;
}

export type StreamHandler<C, P = unknown, T = unknown> = (
  params: P,
  ctx: HandlerContext<Session<C>>,
) => Observable<T> | Promise<Observable<T>>;

export interface PubSubStats {
  /** Messages not delivered to some subscriber because it was slow (drop and keep-latest). */
  dropped: number;
  /** Connections closed with 1013 by the `disconnect` policy. */
  slowConsumerDisconnects: number;
}

interface TopicDefinition<C> {
  pattern: string;
  options: TopicOptions<C>;
  flow: FlowControl;
  retention: Retention;
}

interface SessionSubscription {
  topic: string | undefined;
  delivery: Delivery;
  /** Ends a stream's source, or detaches a topic delivery. */
  teardown: () => void;
}

interface SessionTable {
  /** The session, as the socket fan-out writes to. */
  sink: Sink;
  subscriptions: Map<string, SessionSubscription>;
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
  private readonly head: string;
  private nextId = 0;
  readonly stats: PubSubStats = { dropped: 0, slowConsumerDisconnects: 0 };

  constructor(
    readonly broker: Broker,
    readonly methods: SubscriptionMethods,
    private readonly maxPerSession: number,
    private readonly logger: Logger,
    private readonly exposeErrorDetails: boolean,
  ) {
    this.head = notificationHead(methods.notification);
    this.registry = new TopicRegistry(
      broker,
      this.head,
      () => this.newId(),
      (err, topic) => logger.warn({ err, topic }, 'broker unsubscribe failed'),
    );
  }

  /** Register the subscribe and unsubscribe methods on a registry. */
  install(registry: MethodRegistry<Session<C>>): void {
    registry.method(this.methods.subscribe, (params, ctx) => this.subscribe(params, ctx));
    registry.method(this.methods.unsubscribe, (params, ctx) =>
      this.unsubscribe(ctx.session, readUnsubscribeParams(params)),
    );
  }

  /**
   * Declare a topic clients may subscribe to: an exact name (`prices.BTC`) or a
   * prefix ending in `*` (`chat.*`). Subscribing to an undeclared topic is rejected.
   */
  topic(pattern: string, options: TopicOptions<C> = {}): void {
    if (this.definitions.has(pattern)) throw new Error(`Topic "${pattern}" is already declared`);
    if (pattern.startsWith('$'))
      throw new Error(`Topic names starting with "$" are reserved: "${pattern}"`);
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

  /** Declare a per-subscriber stream: `handler` builds an Observable for each subscriber. */
  stream<P, T>(
    name: string,
    handler: StreamHandler<C, P, T>,
    flow: Partial<FlowControl> = {},
  ): void {
    if (this.streams.has(name)) throw new Error(`Stream "${name}" is already declared`);
    this.streams.set(name, {
      handler: handler as StreamHandler<C>,
      flow: { ...defaultFlowControl, ...flow },
    });
  }

  /** Publish to a topic through the broker; resolves with the message's sequence number. */
  publish(topic: string, data: unknown): Promise<number> {
    let payload: string;
    try {
      payload = JSON.stringify(data === undefined ? null : data);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    const retention = this.resolveTopic(topic)?.retention ?? defaultRetention;
    // A JsonRpcError, so a handler that returns this promise answers its caller precisely.
    return this.broker.publish(topic, payload, retention).catch((err: unknown) => {
      throw new ServerError(
        ErrorCode.BrokerUnavailable,
        'Broker unavailable: the message was not published',
        {
          topic,
          reason: err instanceof Error ? err.message : String(err),
        },
      );
    });
  }

  /** Publish every value of `source` to `topic`; unsubscribe the result to stop. */
  publishFrom(topic: string, source: Observable<unknown>): Subscription {
    return source.subscribe({
      next: (value) =>
        void this.publish(topic, value).catch((err: unknown) =>
          this.logger.warn({ err, topic }, 'publish failed'),
        ),
      error: (err: unknown) => this.logger.warn({ err, topic }, 'published source failed'),
    });
  }

  /** Local subscriber counts by topic; empty when nobody is subscribed. */
  topics(): Record<string, number> {
    return this.registry.snapshot();
  }

  /** Subscriptions (topic and stream) open on one session. */
  subscriptionCount(session: Session<C>): number {
    return this.tables.get(session)?.subscriptions.size ?? 0;
  }

  /** Release everything a closed session held. */
  detach(session: Session<C>): void {
    const table = this.tables.get(session);
    if (!table) return;
    this.tables.delete(session);
    for (const subscription of table.subscriptions.values()) subscription.teardown();
    table.subscriptions.clear();
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
    const stream = this.streams.get(request.name);
    if (stream) {
      this.checkLimit(table); // before the handler, so a refused subscribe has no side effects
      const returned = stream.handler(request.params, ctx);
      const source = isObservable(returned) ? returned : from(await returned);
      return this.startStream(session, this.requireTable(session), source, stream.flow, ctx);
    }
    const definition = this.resolveTopic(request.name);
    if (!definition) throw new InvalidParamsError('Unknown topic', { topic: request.name });
    const { authorize } = definition.options;
    if (authorize && !(await authorize({ session, topic: request.name, params: request.params }))) {
      throw new ServerError(ErrorCode.Unauthorized, 'Not authorized for this topic', {
        topic: request.name,
      });
    }
    this.checkLimit(table);
    await this.registry.hold(request.name);
    if (this.tables.get(session) !== table) {
      // The connection closed while the broker was subscribing.
      this.registry.release(request.name);
      throw new ConnectionClosedError();
    }
    try {
      return this.startTopic(
        request.name,
        table,
        definition.flow,
        ctx,
        request.since,
        request.position,
      );
    } catch (err) {
      // Another subscribe took the last slot while the broker was subscribing.
      this.registry.release(request.name);
      throw err;
    }
  }

  private startTopic(
    topic: string,
    table: SessionTable,
    flow: FlowControl,
    ctx: HandlerContext<Session<C>>,
    since: number | undefined,
    position = false,
  ): string {
    this.checkLimit(table);
    // Sharing the topic's id lets one encoded frame serve every such subscriber.
    const sharedId = this.registry.sharedId(topic);
    const id =
      sharedId !== undefined && !table.subscriptions.has(sharedId) ? sharedId : this.newId();
    const delivery = this.newDelivery(table.sink, id, flow);
    const subscription: SessionSubscription = {
      topic,
      delivery,
      teardown: () => {
        delivery.stop();
        this.registry.detach(topic, delivery);
        this.registry.release(topic);
      },
    };
    table.subscriptions.set(id, subscription);
    ctx.afterReply(() => {
      if (table.subscriptions.get(id) !== subscription) return;
      if (since !== undefined) this.replay(topic, since, delivery);
      else if (position) this.sendPosition(topic, delivery);
      this.registry.attach(topic, delivery);
    });
    return id;
  }

  /**
   * Tell the subscriber where it starts: `{"subscription": id, "seq": N}`, N being the last
   * message it will not get. Live messages wait meanwhile, so N is exact.
   */
  private sendPosition(topic: string, delivery: Delivery): void {
    delivery.pauseForReplay(0);
    this.broker.history(topic, Number.MAX_SAFE_INTEGER).then(
      ({ lastSeq }) => {
        // Messages that arrived while asking are delivered: the position is just before them.
        const position = Math.min(lastSeq, (delivery.firstWaitingSeq ?? lastSeq + 1) - 1);
        delivery.sendRaw(`,"seq":${position}}}`);
        delivery.resume(0, [], position);
      },
      (err: unknown) => {
        this.logger.warn({ err, topic }, 'could not read the topic position');
        delivery.resume(0, [], 0);
      },
    );
  }

  /**
   * Resume: live messages wait while history after `since` is fetched; then the
   * subscriber gets a gap signal if history no longer reaches back that far, the
   * retained messages, and the live ones, each sequence number once.
   */
  private replay(topic: string, since: number, delivery: Delivery): void {
    delivery.pauseForReplay(since);
    this.broker.history(topic, since).then(
      ({ messages, lastSeq }) => {
        if (since > lastSeq) {
          // The topic's numbering restarted (a broker that lost its state): nothing to replay.
          delivery.resume(0, [], lastSeq);
          return;
        }
        const firstAvailable = messages[0]?.seq ?? lastSeq + 1;
        const gap = Math.max(0, firstAvailable - (since + 1));
        const history = messages.map((m) => ({ tail: messageTail(m.payload, m.seq), seq: m.seq }));
        delivery.resume(gap, history);
      },
      (err: unknown) => {
        this.logger.warn({ err, topic }, 'history unavailable: resuming live only');
        // How much was lost is unknown: say so rather than pretend nothing was.
        delivery.resume(null, []);
      },
    );
  }

  private startStream(
    session: Session<C>,
    table: SessionTable,
    source: Observable<unknown>,
    flow: FlowControl,
    ctx: HandlerContext<Session<C>>,
  ): string {
    this.checkLimit(table);
    const id = this.newId();
    const delivery = this.newDelivery(table.sink, id, flow);
    let running: Subscription | undefined;
    let ended = false;
    const subscription: SessionSubscription = {
      topic: undefined,
      delivery,
      teardown: () => {
        ended = true;
        delivery.stop();
        running?.unsubscribe();
      },
    };
    const end = (tail: string): void => {
      if (ended) return;
      ended = true;
      delivery.finish(tail);
      if (table.subscriptions.get(id) === subscription) table.subscriptions.delete(id);
    };
    table.subscriptions.set(id, subscription);
    ctx.afterReply(() => {
      if (ended) return;
      running = source.subscribe({
        next: (value) => {
          let payload: string;
          try {
            payload = JSON.stringify(value === undefined ? null : value);
          } catch (err) {
            session.logger.warn({ err }, 'stream value is not serializable; ending the stream');
            end(finalTail(toWireError(err, this.exposeErrorDetails)));
            running?.unsubscribe();
            return;
          }
          delivery.offer(messageTail(payload));
        },
        error: (err: unknown) => {
          if (!(err instanceof JsonRpcError)) session.logger.warn({ err }, 'stream failed');
          end(finalTail(toWireError(err, this.exposeErrorDetails)));
        },
        complete: () => end(finalTail()),
      });
      if (ended) running.unsubscribe();
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

  private newDelivery(sink: Sink, id: string, flow: FlowControl): Delivery {
    return new Delivery(sink, this.head, JSON.stringify(id), flow, (event) => {
      if (event === 'disconnected') this.stats.slowConsumerDisconnects++;
      else this.stats.dropped++;
    });
  }

  private resolveTopic(name: string): TopicDefinition<C> | undefined {
    // "$node.*" and "$user.*" carry messages addressed to sessions: never subscribable.
    if (name.startsWith('$')) return undefined;
    const exact = this.definitions.get(name);
    if (exact && !exact.pattern.endsWith('*')) return exact;
    return this.prefixes.find((d) => name.startsWith(d.pattern.slice(0, -1)));
  }

  /** The session's subscriptions, made on its first subscribe; throws once it has closed. */
  private requireTable(session: Session<C>): SessionTable {
    if (session.isClosed) throw new ConnectionClosedError();
    let table = this.tables.get(session);
    if (!table) {
      table = { sink: session, subscriptions: new Map() };
      this.tables.set(session, table);
    }
    return table;
  }

  private checkLimit(table: SessionTable): void {
    if (table.subscriptions.size >= this.maxPerSession) {
      throw new ServerError(ErrorCode.TooManySubscriptions, 'Too many subscriptions', {
        limit: this.maxPerSession,
      });
    }
  }

  private newId(): string {
    // Hex quantities, as Ethereum nodes use; unique for the life of the gateway.
    return `0x${(++this.nextId).toString(16)}`;
  }
}

import { Delivery, FIRST_SUBCLASS_FLAG } from '../pubsub/delivery.js';
import type { DeliveryRoute } from '../pubsub/delivery.js';
import type { TopicRegistry } from '../pubsub/topic-registry.js';
import type { BudgetLedger } from '../transport/output-budget.js';
import { HeldOutput } from './held-output.js';
import type { SessionSubscription, SessionTable } from './pubsub-types.js';
import type { Session } from './session.js';

/**
 * What ending a topic subscription tells: the node's topic registry and the lifecycle events;
 * and whom what it holds back during a replay is reported to.
 */
export interface TopicEnds<C> {
  readonly registry: Pick<TopicRegistry, 'detach' | 'release'>;
  /** gateway.events$ (`unsubscribed`), when the gateway set it. */
  lifecycle(): { unsubscribed(session: Session<C>, topic: string): void } | undefined;
  /** The node's output budget (limits.maxBufferedBytesTotal), when it has one. */
  budget?(): BudgetLedger | undefined;
}

/**
 * A topic's route (its subscriptions' shared head, flow control and slow-consumer counter) with
 * what ending one of them tells: one reference on each subscription for all of it.
 */
export interface TopicRoute<C> extends DeliveryRoute {
  readonly ends: TopicEnds<C>;
}

/**
 * Stands for a subscribe's params that were not kept: its topic's definition had no `authorize`
 * to read them again. Unlike `undefined` (the subscribe carried none), what it carried is unknown.
 */
export const PARAMS_NOT_KEPT = Symbol('params not kept');

/** What a topic subscription holds of its subscribe's params (keptParams in pubsub-service.ts). */
export type KeptParams = string | typeof PARAMS_NOT_KEPT | undefined;

/**
 * UTF-8 bytes of a subscription's topic and kept params, counted against its connection
 * (maxTopicBytesPerConnection) while it lives.
 */
export function topicBytesOf(topic: string, kept: KeptParams): number {
  return (
    Buffer.byteLength(topic, 'utf8') +
    (typeof kept === 'string' ? Buffer.byteLength(kept, 'utf8') : 0)
  );
}

/** `flags` bit: announced live (lifecycle `subscribed`). */
const STARTED = FIRST_SUBCLASS_FLAG;

/**
 * A session's subscription to a topic, and what its end undoes: the delivery leaves the topic,
 * the node lets go of the topic, the connection's bytes (topic name, kept params) come back. A
 * class rather than a closure: a closure made where the subscribe is handled would keep that
 * whole scope (the request, the call's context) for as long as the subscription lives, on every
 * subscriber. It is its own Delivery (the outbound path the topic's registry writes to) rather
 * than holding one: a gateway keeps one per subscriber of every topic, and one object instead
 * of two saves an object header and a reference on each (32 bytes, test/pubsub/delivery-
 * footprint.test.ts).
 */
export class TopicSubscription<C> extends Delivery<TopicRoute<C>> implements SessionSubscription {
  /** What `onTopicSubscribed` (presence) returned for it: run after the rest of its end. */
  ended: (() => void) | undefined = undefined;

  constructor(
    readonly topic: string,
    /**
     * The subscribe's params as JSON, kept only for a topic whose `authorize` is asked again
     * after a refresh (their bytes are part of `bytes`); PARAMS_NOT_KEPT when it carried some
     * that were not kept, undefined when it carried none.
     */
    private readonly kept: KeptParams,
    /** The topic's head, flow control, slow-consumer counter and ends, shared by its subscriptions. */
    route: TopicRoute<C>,
    /** The subscription id, JSON-quoted. */
    quotedId: string,
    private readonly table: SessionTable,
  ) {
    // Written to the table's session, which owns it (a publish `except` it passes it by).
    super(table.sink, route, quotedId);
  }

  /** Announced live (lifecycle `subscribed`): its end is announced too. */
  get started(): boolean {
    return (this.flags & STARTED) !== 0;
  }

  set started(started: boolean) {
    this.flags = started ? this.flags | STARTED : this.flags & ~STARTED;
  }

  /** The outbound path of the subscription: itself. */
  get delivery(): Delivery {
    return this;
  }

  /** What the subscribe carried for the topic's `authorize`; undefined when none or not kept. */
  get params(): unknown {
    return typeof this.kept === 'string' ? (JSON.parse(this.kept) as unknown) : undefined;
  }

  /** Whether `params` is what the subscribe carried: false when it carried params not kept. */
  get paramsKnown(): boolean {
    return this.kept !== PARAMS_NOT_KEPT;
  }

  /** Whether its bytes include kept params. */
  get keepsParams(): boolean {
    return typeof this.kept === 'string';
  }

  /** What it holds back for a replay counts for its connection (the table's HeldOutput). */
  protected override heldChanged(chars: number): void {
    (this.table.held ??= new HeldOutput(this.route.ends.budget?.())).add(chars);
  }

  teardown(): void {
    this.stop();
    // Its bytes, as they were counted when it was made (topic and kept params never change).
    this.table.topicBytes -= topicBytesOf(this.topic, this.kept);
    const { ends } = this.route;
    ends.registry.detach(this.topic, this);
    ends.registry.release(this.topic);
    if (this.started) ends.lifecycle()?.unsubscribed(this.table.sink as Session<C>, this.topic);
    this.ended?.();
  }
}

import { Observable, Subject } from 'rxjs';
import type { Logger } from '../peer/logger.js';
import { JsonRpcError } from '../protocol/errors.js';
import { ConnectionClosedError, NotConnectedError } from '../protocol/local-errors.js';
import type { ErrorObject, Params } from '../protocol/types.js';

/** One message of a subscription, with what the server said about it. */
export interface SubscriptionEvent<T> {
  data: T;
  /** The topic's sequence number (topics only). */
  seq?: number;
  /** How many messages the server skipped for this subscriber just before this one (slow consumer). */
  missed?: number;
  /**
   * Set on a gap signal (then `data` is undefined): after a resume, history no longer held
   * this many of the messages missed while disconnected (`null`: unknown how many).
   */
  gap?: number | null;
}

export interface ClientSubscriptionMethods {
  subscribe: string;
  notification: string;
  unsubscribe: string;
}

/** What the manager needs of the client: calls that queue while disconnected. */
export interface SubscriptionCaller {
  call(method: string, params?: Params): Promise<unknown>;
  readonly isOpen: boolean;
  /** Closed for good: nothing will reconnect. */
  readonly isClosed: boolean;
}

interface Shared {
  key: string;
  /** `[topic]` or `[topic, params]`, as sent. */
  params: unknown[];
  subject: Subject<SubscriptionEvent<unknown>>;
  observers: number;
  serverId: string | undefined;
  /** Set when the connection dropped under an active subscription: resubscribe on the next open. */
  resubscribe: boolean;
  /** Bumped on each (re)subscribe, so a stale reply is recognized. */
  generation: number;
  lastSeq: number | undefined;
}

/** Notifications for ids not yet known: the subscribe reply may still be on its way up the stack. */
const ORPHAN_IDS = 64;
const ORPHANS_PER_ID = 256;

/**
 * Client-side subscriptions: cold Observables shared per (topic, params),
 * started by the first Observer and ended by the last, re-established after
 * every reconnect. Knows nothing of sockets; the client feeds it
 * notifications and connection events.
 */
export class ClientSubscriptions {
  private readonly shared = new Map<string, Shared>();
  private readonly byServerId = new Map<string, Shared>();
  private readonly orphans = new Map<string, Record<string, unknown>[]>();

  constructor(
    private readonly caller: SubscriptionCaller,
    readonly methods: ClientSubscriptionMethods,
    private readonly logger: Logger,
  ) {}

  observe<T>(topic: string, params?: unknown): Observable<SubscriptionEvent<T>> {
    const wireParams: unknown[] = params === undefined ? [topic] : [topic, params];
    const key = JSON.stringify(wireParams);
    return new Observable<SubscriptionEvent<T>>((subscriber) => {
      let shared = this.shared.get(key);
      if (!shared) {
        shared = {
          key,
          params: wireParams,
          subject: new Subject(),
          observers: 0,
          serverId: undefined,
          resubscribe: false,
          generation: 0,
          lastSeq: undefined,
        };
        this.shared.set(key, shared);
      }
      const entry = shared;
      // Observers of one (topic, params) share one subject; T is the caller's claim about its data.
      const inner = (entry.subject as unknown as Subject<SubscriptionEvent<T>>).subscribe(
        subscriber,
      );
      if (++entry.observers === 1) this.start(entry);
      return () => {
        inner.unsubscribe();
        if (--entry.observers === 0) this.stop(entry);
      };
    });
  }

  /** Route one subscription notification. Returns false when it is not one. */
  handleNotification(params: Params | undefined): boolean {
    if (!params || Array.isArray(params)) return false;
    const message = params as Record<string, unknown>;
    const id = message['subscription'];
    if (typeof id !== 'string') return false;
    const shared = this.byServerId.get(id);
    if (shared) this.deliver(shared, message);
    else this.keepOrphan(id, message);
    return true;
  }

  /** The connection dropped: server ids are void; active subscriptions resubscribe on the next open. */
  connectionLost(): void {
    for (const shared of this.byServerId.values()) {
      shared.serverId = undefined;
      shared.resubscribe = true;
    }
    this.byServerId.clear();
    this.orphans.clear();
  }

  /** A connection opened: re-establish what was active before. */
  connectionOpened(): void {
    for (const shared of this.shared.values()) {
      if (shared.resubscribe && shared.observers > 0) this.start(shared);
    }
  }

  /** The client closed for good: every subscription completes. */
  closeAll(): void {
    for (const shared of [...this.shared.values()]) shared.subject.complete();
    this.shared.clear();
    this.byServerId.clear();
    this.orphans.clear();
  }

  private start(shared: Shared): void {
    shared.resubscribe = false;
    const generation = ++shared.generation;
    // After a reconnect, ask for what came after the last message seen (gap-free resume).
    // Streams have no sequence; a topic subscription asks where it starts (position), so that
    // even before its first message a reconnect can resume from there.
    const options = shared.lastSeq === undefined ? { position: true } : { since: shared.lastSeq };
    const params: Params = [shared.params[0], shared.params[1] ?? null, options];
    this.caller.call(this.methods.subscribe, params).then(
      (id) => {
        if (typeof id !== 'string') return;
        if (generation !== shared.generation || shared.observers === 0) {
          // Everyone left before the reply: end it on the server rather than leak it.
          this.sendUnsubscribe(id);
          return;
        }
        shared.serverId = id;
        this.byServerId.set(id, shared);
        const early = this.orphans.get(id);
        if (early) {
          this.orphans.delete(id);
          for (const message of early) this.deliver(shared, message);
        }
      },
      (err: unknown) => {
        if (generation !== shared.generation || shared.observers === 0) return;
        const retryable = err instanceof ConnectionClosedError || err instanceof NotConnectedError;
        if (retryable && !this.caller.isClosed) {
          // Lost with the connection; the next open resubscribes.
          shared.resubscribe = true;
          return;
        }
        this.forget(shared);
        shared.subject.error(err);
      },
    );
  }

  private stop(shared: Shared): void {
    this.forget(shared);
    shared.generation++;
    if (shared.serverId !== undefined) this.sendUnsubscribe(shared.serverId);
    shared.serverId = undefined;
  }

  private forget(shared: Shared): void {
    if (this.shared.get(shared.key) === shared) this.shared.delete(shared.key);
    if (shared.serverId !== undefined) this.byServerId.delete(shared.serverId);
  }

  private sendUnsubscribe(id: string): void {
    if (!this.caller.isOpen) return; // the server dropped it with the connection
    this.caller
      .call(this.methods.unsubscribe, [id])
      .catch((err: unknown) => this.logger.debug({ err, id }, 'unsubscribe failed'));
  }

  private deliver(shared: Shared, message: Record<string, unknown>): void {
    if ('error' in message || message['complete'] === true) {
      // The last notification of a per-subscriber stream.
      this.forget(shared);
      shared.serverId = undefined;
      if ('error' in message)
        shared.subject.error(JsonRpcError.fromErrorObject(message['error'] as ErrorObject));
      else shared.subject.complete();
      return;
    }
    if ('gap' in message) {
      const gap = message['gap'];
      this.logger.warn({ gap }, 'resumed subscription: messages lost beyond history');
      shared.subject.next({ data: undefined, gap: typeof gap === 'number' ? gap : null });
      return;
    }
    if (!('result' in message)) {
      // The starting point (position) of a topic subscription: nothing to emit.
      if (typeof message['seq'] === 'number') shared.lastSeq = message['seq'];
      return;
    }
    const event: SubscriptionEvent<unknown> = { data: message['result'] };
    if (typeof message['seq'] === 'number') {
      event.seq = message['seq'];
      shared.lastSeq = message['seq'];
    }
    if (typeof message['missed'] === 'number') event.missed = message['missed'];
    shared.subject.next(event);
  }

  private keepOrphan(id: string, message: Record<string, unknown>): void {
    let list = this.orphans.get(id);
    if (!list) {
      if (this.orphans.size >= ORPHAN_IDS) {
        const oldest = this.orphans.keys().next().value;
        if (oldest !== undefined) this.orphans.delete(oldest);
      }
      list = [];
      this.orphans.set(id, list);
    }
    if (list.length < ORPHANS_PER_ID) list.push(message);
  }
}

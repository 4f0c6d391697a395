import { Observable } from 'rxjs';
import { Hub } from '../peer/hub.js';
import type { Logger } from '../peer/logger.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { InternalError, JsonRpcError } from '../protocol/errors.js';
import {
  ConnectionClosedError,
  NotConnectedError,
  TimeoutError,
  TooManyPendingCallsError,
} from '../protocol/local-errors.js';
import {
  decodeSubscriptionNotification,
  isSequenceNumber,
  isSubscriptionId,
} from '../protocol/subscription-frames.js';
import type {
  SubscriptionId,
  SubscriptionMethodNames,
  SubscriptionUpdate,
} from '../protocol/subscription-frames.js';
import type { Params } from '../protocol/types.js';
import { AuthenticationError } from './authentication.js';
import { canonicalJson } from './canonical-json.js';
import { clientDefaults } from './client-options.js';

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

/** The subscription protocol's method names (defaults: DEFAULT_SUBSCRIPTION_METHODS). */
export type ClientSubscriptionMethods = SubscriptionMethodNames;

/** What the manager needs of the client: calls that queue while disconnected. */
export interface SubscriptionCaller {
  call(method: string, params?: Params): Promise<unknown>;
  /**
   * The connection open now, as a token (undefined while there is none): what an unsubscribe
   * means something on, the server's ids being its own.
   */
  readonly connection: object | undefined;
  /**
   * A call sent on `connection` at once, never queued for a later one (rejected when it is no
   * longer the one open, or its call table is full).
   */
  callOn(connection: object, method: string, params?: Params): Promise<unknown>;
  /**
   * A subscribe call: queued while disconnected without a timeout. `onAccepted` is called with
   * the result as soon as the reply is read, before any notification read after it.
   */
  subscribe(
    method: string,
    params: Params,
    onAccepted: (result: unknown) => void,
    /** Aborted when no one wants it any more: taken out of the queue if it waits there. */
    withdrawn: AbortSignal,
  ): Promise<unknown>;
  /** How long to wait before the `attempt`-th retry (from 0) of a subscribe that failed transiently. */
  retryDelay(attempt: number): number;
  readonly isOpen: boolean;
  /** Closed for good: nothing will reconnect. */
  readonly isClosed: boolean;
}

/** One subscription's entry: shared by every Observer of its (topic, params). */
export interface Shared {
  key: string;
  /**
   * Made by the server (`rpc.joined`): kept, and re-established after a reconnect, without
   * Observers, until the server ends it or the client closes.
   */
  joined: boolean;
  /** `[topic]` or `[topic, params]`, as sent. */
  params: unknown[];
  hub: Hub<SubscriptionEvent<unknown>>;
  observers: number;
  serverId?: SubscriptionId | undefined;
  /** Set when the connection dropped under an active subscription: resubscribe on the next open. */
  resubscribe?: boolean;
  /** Bumped on each (re)subscribe, so a stale reply is recognized. */
  generation: number;
  lastSeq?: number | undefined;
  /**
   * Where the server said the current delivery starts: the `since` of the last (re)subscribe,
   * the position or a join's `seq`, the end of a gap; else the first message's seq. A message
   * from it up to `lastSeq` is a duplicate (a replay's overlap); one below it cannot be: the
   * topic was numbered anew.
   */
  startSeq: number;
  /**
   * `lastSeq` is a baseline the next message can be checked against: false until the first
   * position or message, and after a gap of unknown size that named no numbering.
   */
  checked?: boolean;
  /**
   * Accepted on a connection lost before it learnt where it starts (its position or a first
   * numbered message): what was published from then until the next subscribe cannot be asked
   * for, so the next numbered frame is preceded by a gap signal of unknown size.
   */
  unplaced?: boolean;
  /** When the last resubscribes to fill a hole happened (at most RESYNC_BUDGET kept). */
  resyncs: number[];
  /** The numbering `lastSeq` belongs to (the topic's epoch), once the server said it. */
  epoch?: string | undefined;
  /** Set while waiting to retry a subscribe that failed transiently. */
  retryTimer?: ReturnType<typeof setTimeout> | undefined;
  /** Transient failures in a row, for the retry backoff. */
  retries: number;
  /**
   * Aborted when the subscribe last sent is not wanted any more (stopped, sent again): one
   * waiting in the offline queue leaves it, instead of holding a place in maxQueued and going
   * out on the next connection for nobody.
   */
  withdraw?: AbortController | undefined;
}

/** Where a (re)subscribe asks to start. */
type StartOptions = { position: true } | { since: number; epoch: string | undefined };

/**
 * Notifications for ids not yet known, kept for a server that sends them before the subscribe
 * reply (this gateway never does): at most ORPHANS_PER_ID for each of ORPHAN_IDS ids, and at
 * most ORPHAN_TEXT_CHARS of the frames they came in together (the CLI's bound on the same, MAX_EARLY_BYTES), so that a
 * server cannot make the client hold its messages however large they are. A message dropped
 * here is a hole in the sequence, filled by resubscribing once the reply names its id (#fill): a
 * position after it could pass it by unseen by the continuity check; one
 * without a sequence number is counted (for at most DROP_COUNT_IDS ids) and told as a gap signal
 * of that count once the reply names its id, after the messages kept.
 */
const ORPHAN_IDS = 64;
const ORPHANS_PER_ID = 256;
export const ORPHAN_TEXT_CHARS = 16_777_216; // 16 MiB: a literal, which a bundler drops where it is unused
/** Ids whose dropped messages without a sequence number are counted (the oldest forgotten). */
const DROP_COUNT_IDS = 256;

/**
 * The notifications kept for one id not yet known, and the characters of the frames they came in
 * (each charged its whole frame: a batch's members are charged the batch each, never less).
 */
interface Orphans {
  updates: SubscriptionUpdate[];
  chars: number;
}

/**
 * A hole in a subscription's sequence (a message missing with no gap signal for it) is filled
 * by resubscribing from the last message seen, at most this many times per window; beyond
 * that the hole is reported as a gap signal of its size, so nothing is ever missed in silence.
 */
const RESYNC_BUDGET = 5;
const RESYNC_WINDOW_MS = 60_000;
/**
 * Ids whose unsubscribe was given up on this connection (the server may still hold them, and
 * send for them) kept at most: the latest, FIFO.
 */
const ABANDONED_IDS = 256;
/**
 * Subscribes in flight at once at most, whatever the call table's size: under the gateway's
 * default `maxInFlight` (128) with room for the application's calls beside them. A subscribe
 * the server still refuses as busy waits for one of these to settle (serverBusy).
 */
export const MAX_SUBSCRIBE_WINDOW = 64;
/** A server's joins refused past `maxJoined` are logged at warn at most once per this interval. */
const JOINED_WARN_INTERVAL_MS = 60_000;

/** The client's options the manager keeps to (createClient's `maxJoined`, `maxPendingCalls`). */
export interface SubscriptionLimits {
  /** Most subscriptions made by the server (`rpc.joined`) held at once; beyond it one is unsubscribed. */
  maxJoined: number;
  /**
   * The client's call table: at most half of it is taken by subscribes at once, so that a
   * reconnect's resubscribes go in waves and calls made meanwhile keep room.
   */
  maxPendingCalls: number;
}

/**
 * Each client's manager, for what reads its entries from outside the client
 * (subscriptionStatus$), so that the client carries no method for them.
 */
export const managers = new WeakMap<object, ClientSubscriptions>();

/** A subscription the server made for this client (`rpc.joined`), as the client shows it. */
export interface JoinedSubscription {
  topic: string;
  /** Its messages, as `subscribeWithMeta` gives them; completes when the server ends it. */
  subscription: Observable<SubscriptionEvent<unknown>>;
}

/** Where a joined subscription's entry is kept: apart from the client's own of the same topic. */
function joinedKey(topic: string): string {
  return `joined ${canonicalJson([topic])}`;
}

/** A subscription's entry before its first subscribe: no observers, no server id, no position. */
function newShared(key: string, params: unknown[], joined: boolean): Shared {
  return {
    key,
    joined,
    params,
    hub: new Hub(),
    observers: 0,
    generation: 0,
    startSeq: 0,
    resyncs: [],
    retries: 0,
  };
}

/** No retry is waiting any more. */
function stopRetry(shared: Shared): void {
  clearTimeout(shared.retryTimer);
  shared.retryTimer = undefined;
}

/** Keep at most `limit` entries of `kept`, dropping the oldest. */
function trim(kept: Set<unknown> | Map<unknown, unknown>, limit: number): void {
  if (kept.size > limit) kept.delete(kept.keys().next().value);
}

/** Worth keeping on the server: someone observes it, or the server made it. */
function active(shared: Shared): boolean {
  return shared.observers > 0 || shared.joined;
}

/** Sends of one unsubscribe at most (#sendUnsubscribe). */
const UNSUBSCRIBE_ATTEMPTS = 5;

/**
 * The gateway's -32000 for a connection with `maxInFlight` calls running (`data.maxInFlight`):
 * gone as its calls finish. Not its other -32000s (a node holding its most topics, a user at
 * its most connections), which last.
 */
function serverBusy(err: unknown): boolean {
  if (!(err instanceof JsonRpcError) || err.code !== ErrorCode.ServerBusy) return false;
  const data = err.data as { maxInFlight?: unknown } | null | undefined;
  return typeof data === 'object' && data !== null && 'maxInFlight' in data;
}

/** A refusal that may not hold a moment later, on the same connection. */
function momentary(err: unknown): boolean {
  return (
    err instanceof TimeoutError ||
    err instanceof TooManyPendingCallsError ||
    serverBusy(err) ||
    (err instanceof JsonRpcError && err.code === ErrorCode.RateLimited)
  );
}

/**
 * Worth retrying: lost with the connection (the next open resubscribes), the broker behind the
 * gateway is down (-32009), the server is draining (-32006: it closes this connection next, and
 * the retry then waits for the next one), the connection is over a rate (-32003: its tokens come
 * back), no answer came in time, or a call table was full: the client's own, or the server's
 * for the connection (-32000 with `maxInFlight`); their slots come back as calls are answered.
 * Any other error is the server's final word.
 */
function transient(err: unknown): boolean {
  return (
    momentary(err) ||
    err instanceof ConnectionClosedError ||
    // Lost with a connection closed for its credentials: the client dials again, or closes.
    err instanceof AuthenticationError ||
    err instanceof NotConnectedError ||
    (err instanceof JsonRpcError &&
      (err.code === ErrorCode.BrokerUnavailable || err.code === ErrorCode.ShuttingDown))
  );
}

/**
 * Client-side subscriptions: cold Observables shared per (topic, params),
 * started by the first Observer and ended by the last, re-established after
 * every reconnect. Knows nothing of sockets; the client feeds it
 * notifications and connection events.
 */
export class ClientSubscriptions {
  /** The entries by key (canonical JSON of `[topic]` or `[topic, params]`). */
  readonly shared = new Map<string, Shared>();
  /**
   * Called when an entry (re)subscribes, is accepted, or is stopped: set by
   * subscriptionStatus$, which reads the entries' state from their fields (a connection lost
   * it hears of on disconnects$), so that the manager carries no more than these calls.
   */
  declare onStatus?: () => void;
  readonly #byServerId = new Map<SubscriptionId, Shared>();
  readonly #orphans = new Map<SubscriptionId, Orphans>();
  /** The characters charged for every notification `#orphans` holds. */
  #orphanChars = 0;
  /**
   * For an id not known yet, how many of its messages without a sequence number were dropped;
   * NaN once a notification that moves the count (a numbered message, a gap signal) was: a hole
   * the continuity check may never see, since a position after it (messages published `except`
   * this session) would pass it by.
   */
  readonly #orphanDrops = new Map<SubscriptionId, number>();
  /**
   * Ids unsubscribed on this connection whose unsubscribe is not answered yet, with how many of
   * them are in flight: a message for one is its old subscription's, dropped, never kept for a
   * later subscription the server hands the id to (a topic's shared id). Once the unsubscribe is
   * answered, no message of the old subscription can follow (the server answers after the
   * last), so the id is let go. Bounded by the unsubscribes in flight or waiting to be sent again.
   */
  readonly #retired = new Map<SubscriptionId, number>();
  /**
   * Ids whose unsubscribe was given up: the server may still send for them until the
   * connection ends. The latest ABANDONED_IDS.
   */
  readonly #abandoned = new Set<SubscriptionId>();
  readonly #joinedHub = new Hub<JoinedSubscription>();
  /** Each subscription the server makes for this client, as it is announced. */
  readonly joined$: Observable<JoinedSubscription> = this.#joinedHub.observable;
  readonly #maxJoined: number;
  /** Entries made by the server held now (against `maxJoined`). */
  #joinedHeld = 0;
  /** Joins refused since the last warning about them, and when that was. */
  #joinedRefused = 0;
  #joinedWarnedAt = -Infinity;
  /** Unsubscribes of refused joins in flight. */
  #refusing = 0;
  /** Subscribes sent on the current connection and not settled yet, at most `#window`. */
  #inFlight = 0;
  readonly #window: number;
  /**
   * Entries waiting for a subscribe to settle before theirs goes: past the window, or refused
   * for a full call table while some of the manager's own are in flight. In the order they came.
   */
  readonly #waiting = new Set<Shared>();
  /**
   * Bumped on each lost connection: a subscribe settling after it (even one answered late on a
   * connection left while calls finish there) frees no slot of this one's window.
   */
  #line = 0;

  constructor(
    private readonly caller: SubscriptionCaller,
    readonly methods: ClientSubscriptionMethods,
    private readonly logger: Logger,
    limits: Partial<SubscriptionLimits> = {},
  ) {
    this.#maxJoined = limits.maxJoined ?? clientDefaults.maxJoined;
    this.#window = Math.max(
      1,
      Math.min(
        MAX_SUBSCRIBE_WINDOW,
        Math.ceil((limits.maxPendingCalls ?? clientDefaults.maxPendingCalls) / 2),
      ),
    );
  }

  observe<T>(topic: string, params?: unknown): Observable<SubscriptionEvent<T>> {
    // T is the caller's claim about its data.
    return this.#watch(() => this.#entryOf(topic, params)) as Observable<SubscriptionEvent<T>>;
  }

  /**
   * The messages of `observe(topic, params)`, gap signals left out (what `subscribe` gives): each
   * message goes from the hub to the application's subscriber through one plain observer, the
   * path every message to every subscription takes.
   */
  observeMessages<T>(topic: string, params?: unknown): Observable<T> {
    return new Observable<T>((subscriber) => {
      const shared = this.#entryOf(topic, params);
      const remove = shared.hub.watch({
        next: (event) => {
          if (event.gap === undefined) subscriber.next(event.data as T);
        },
        error: (error: unknown) => subscriber.error(error),
        complete: () => subscriber.complete(),
      });
      return this.#observed(shared, remove);
    });
  }

  /** The client's own subscription entry for `topic` and `params`, made on first use. */
  #entryOf(topic: string, params: unknown): Shared {
    const wireParams: unknown[] = params === undefined ? [topic] : [topic, params];
    // Key order does not matter: { a, b } and { b, a } share one wire subscription.
    const key = canonicalJson(wireParams);
    let shared = this.shared.get(key);
    if (!shared) this.shared.set(key, (shared = newShared(key, wireParams, false)));
    return shared;
  }

  /**
   * Observers of one entry, sharing its hub: the client's own subscription is started by the
   * first and ended by the last; a joined one (`entry` gives it, or undefined once it has
   * ended) lets them come and go without ending it.
   */
  #watch(entry: () => Shared | undefined): Observable<SubscriptionEvent<unknown>> {
    return new Observable<SubscriptionEvent<unknown>>((subscriber) => {
      const shared = entry();
      if (!shared) return subscriber.complete(); // ended already
      const inner = shared.hub.observable.subscribe(subscriber);
      return this.#observed(shared, () => inner.unsubscribe());
    });
  }

  /**
   * One more observer of `shared` (starting the client's own subscription with the first);
   * returns its teardown, which runs `remove` and stops the subscription with the last.
   */
  #observed(shared: Shared, remove: (() => void) | undefined): () => void {
    if (++shared.observers === 1 && !shared.joined) this.#start(shared);
    return () => {
      remove?.();
      if (--shared.observers === 0 && !shared.joined) this.#stop(shared);
    };
  }

  /**
   * The server subscribed this client itself (`rpc.joined { topic, subscription, seq? }`): the
   * subscription is kept like one of the client's own (resumed after a reconnect from the last
   * message seen) and announced on `joined$`. Its frames follow this notification.
   */
  handleJoined(params: Params | undefined): void {
    const {
      topic,
      subscription: id,
      seq,
    } = (params ?? {}) as {
      topic?: unknown;
      subscription?: unknown;
      seq?: unknown;
    };
    if (typeof topic !== 'string' || !isSubscriptionId(id) || this.#byServerId.has(id)) {
      this.logger.debug({ params }, 'rpc.joined ignored');
      return;
    }
    const key = joinedKey(topic);
    const existing = this.shared.get(key);
    const last = existing?.lastSeq;
    if (
      existing?.serverId !== undefined ||
      (last !== undefined && !(isSequenceNumber(seq) && seq <= last))
    ) {
      // Joined twice (a join racing the client's resubscribe): one subscription is enough. An
      // entry not subscribed on this connection yet is on its way to resubscribing (in flight,
      // waiting, or at the next open): when it resumes from the last message seen and the join
      // starts later (no seq: at the topic's current position), the client's own is kept, as
      // taking the join would skip what was published while the client was away (an
      // application that joins on every connect). Within the refused joins' window, as a server
      // repeating the join could otherwise fill the call table with unsubscribes.
      this.#endJoin(id);
      return;
    }
    if (!existing && this.#joinedHeld >= this.#maxJoined) {
      // Each joined subscription is kept for good: a server joining without end would grow
      // the client without end. The one over the bound is ended on the server.
      this.#refuseJoin(topic, id);
      return;
    }
    const shared = existing ?? newShared(key, [topic], true);
    // A resubscribe of it under way is superseded: its reply, when it comes, is unsubscribed.
    shared.generation++;
    shared.resubscribe = false;
    stopRetry(shared);
    this.#waiting.delete(shared);
    if (isSequenceNumber(seq)) {
      // Its frames replay what came after `seq`.
      shared.startSeq = seq;
      if (!existing) {
        shared.lastSeq = seq;
        shared.checked = true;
      }
    }
    shared.serverId = id;
    if (!existing) this.#joinedHeld++;
    this.shared.set(key, shared);
    this.#byServerId.set(id, shared);
    this.#letGo(id);
    if (!existing) this.#joinedHub.next({ topic, subscription: this.#observeJoined(shared) });
  }

  /** Unsubscribe a join not taken, if the window has room; past it, it is left to the server. */
  #endJoin(id: SubscriptionId): void {
    if (this.#refusing < this.#window && this.caller.isOpen) {
      this.#refusing++;
      this.#sendUnsubscribe(id, () => this.#refusing--);
    }
  }

  /**
   * A join past `maxJoined`: unsubscribed, and told at warn at most once per interval. Their
   * unsubscribes in flight are bounded by the window too: past it, one is left to the server
   * (its frames are dropped unread), rather than refused by a full call table at a cost per join.
   */
  #refuseJoin(topic: string, id: SubscriptionId): void {
    this.#endJoin(id);
    this.#joinedRefused++;
    const now = Date.now();
    if (now - this.#joinedWarnedAt < JOINED_WARN_INTERVAL_MS) return;
    this.logger.warn(
      { topic, maxJoined: this.#maxJoined, refused: this.#joinedRefused },
      'rpc.joined refused: maxJoined held',
    );
    this.#joinedWarnedAt = now;
    this.#joinedRefused = 0;
  }

  /**
   * The subscription to `topic` this client has: its own (`subscribe(topic)` without params,
   * while observed) or one the server made; undefined when it has neither.
   */
  subscriptionOf(topic: string): Observable<SubscriptionEvent<unknown>> | undefined {
    const own = this.shared.get(canonicalJson([topic]));
    if (own && own.observers > 0) return this.observe(topic);
    const joined = this.shared.get(joinedKey(topic));
    return joined && this.#observeJoined(joined);
  }

  /** Observers of a joined subscription: they come and go without ending it. */
  #observeJoined(shared: Shared): Observable<SubscriptionEvent<unknown>> {
    return this.#watch(() => (this.shared.get(shared.key) === shared ? shared : undefined));
  }

  /**
   * Route one subscription notification, read from a frame of `frameChars` characters (what
   * keeping it for an id not yet known counts). Returns false when it is not one (its params
   * name no subscription id: see decodeSubscriptionNotification).
   */
  handleNotification(params: Params | undefined, frameChars: number): boolean {
    const notification = decodeSubscriptionNotification(params);
    if (!notification) return false;
    this.#route(notification.subscription, notification.update, frameChars);
    return true;
  }

  /** The connection dropped: server ids are void; active subscriptions resubscribe on the next open. */
  connectionLost(): void {
    this.#dropUnsubscribeRetries();
    for (const shared of this.#byServerId.values()) {
      shared.serverId = undefined;
      shared.resubscribe = true;
      if (shared.lastSeq === undefined) shared.unplaced = true;
    }
    for (const shared of this.shared.values()) {
      if (shared.retryTimer === undefined) continue;
      // Waiting to retry: the next open does it.
      stopRetry(shared);
      shared.resubscribe = true;
    }
    for (const shared of this.#waiting) shared.resubscribe = true;
    this.#waiting.clear();
    // The subscribes in flight fail with the connection: the next one starts with a free table.
    this.#inFlight = 0;
    this.#line++;
    this.#forgetIds();
  }

  /** A connection opened: re-establish what was active before. */
  connectionOpened(): void {
    for (const shared of this.shared.values()) {
      if (shared.resubscribe && active(shared)) this.#start(shared);
    }
  }

  /** The client closed for good: every subscription completes. */
  closeAll(): void {
    // First: a subscription stopped as its hub completes below sends those waiting (#stop), and
    // none is to go now.
    this.#waiting.clear();
    this.#dropUnsubscribeRetries();
    for (const shared of [...this.shared.values()]) {
      stopRetry(shared);
      shared.hub.complete();
    }
    this.shared.clear();
    this.#joinedHeld = 0;
    this.#forgetIds();
    this.#joinedHub.complete();
  }

  /**
   * (Re)subscribe `shared`: at once, or, while the window of subscribes in flight is full,
   * once one of them settles (a reconnect's resubscribes go in waves that fit the call table).
   */
  #start(shared: Shared): void {
    shared.resubscribe = false;
    stopRetry(shared);
    this.#waiting.delete(shared);
    if (this.caller.isOpen && this.#inFlight >= this.#window) {
      // A reply still on its way for it is stale from here on.
      shared.generation++;
      this.#waiting.add(shared);
      this.onStatus?.();
      return;
    }
    this.#send(shared);
  }

  /** Send the waiting entries the window has room for (an entry leaves it when forgotten). */
  #pump(): void {
    for (const shared of this.#waiting) {
      if (this.#inFlight >= this.#window || !this.caller.isOpen) return;
      this.#waiting.delete(shared);
      this.#send(shared);
    }
  }

  #send(shared: Shared): void {
    const generation = ++shared.generation;
    // After a reconnect, ask for what came after the last message seen (gap-free resume).
    // Streams have no sequence; a topic subscription asks where it starts (position), so that
    // even before its first message a reconnect can resume from there.
    // With the epoch, a server whose broker lost the topic (and numbers it anew) can tell; an
    // epoch not known yet is left out of the JSON.
    const since = shared.lastSeq;
    const options: StartOptions =
      since === undefined ? { position: true } : { since, epoch: shared.epoch };
    if (since !== undefined) shared.startSeq = since;
    const params: Params = [shared.params[0], shared.params[1] ?? null, options];
    let answered = false;
    let taken = false;
    // Runs as the reply is read, before the notifications read after it: the server sends the
    // reply first, so from here on every message of the subscription finds its id.
    const accepted = (id: unknown): void => {
      if (answered || !isSubscriptionId(id)) return;
      // An id another subscription holds would take its messages (and an unsubscribe of it
      // would end the other): this one fails as a malformed response instead.
      const holder = this.#byServerId.get(id);
      if (holder && holder !== shared) {
        taken = true;
        return;
      }
      answered = true;
      if (generation !== shared.generation || !active(shared)) {
        // Everyone left before the reply: end it on the server rather than leak it.
        this.#sendUnsubscribe(id);
        return;
      }
      shared.retries = 0;
      shared.serverId = id;
      this.#byServerId.set(id, shared);
      this.#letGo(id);
      this.onStatus?.();
      // Those kept after the stream's end (or a resubscribe that gave the id up) are given up:
      // kept again, they would be charged nothing, and go to the next subscribe naming the id.
      for (const update of this.#takeOrphans(id) ?? []) {
        if (this.#byServerId.get(id) !== shared) break;
        this.#route(id, update, 0);
      }
      // Dropped after those kept, with no number for the continuity check to find them by, or
      // (NaN) a hole it may not find: filled as one it finds is.
      const dropped = this.#orphanDrops.get(id);
      this.#orphanDrops.delete(id);
      if (dropped !== undefined && this.#byServerId.get(id) === shared) {
        if (dropped >= 0) shared.hub.next({ data: undefined, gap: dropped });
        else this.#fill(shared, null);
      }
    };
    // Counted against the window only when it goes on this connection (not queued offline).
    const line = this.caller.isOpen ? this.#line : -1;
    if (line === this.#line) this.#inFlight++;
    /**
     * Its slot is free again. The waiting go, unless it was refused for a full table: it never
     * held a slot, and sending again at once would only be refused again.
     */
    const settled = (full: boolean): void => {
      if (line !== this.#line) return;
      this.#inFlight--;
      if (!full) this.#pump();
    };
    shared.withdraw?.abort();
    const withdraw = (shared.withdraw = new AbortController());
    this.caller.subscribe(this.methods.subscribe, params, accepted, withdraw.signal).then(
      (id) => {
        settled(false);
        accepted(id);
        if (answered || generation !== shared.generation || !active(shared)) return;
        // Answered, but with no subscription id: no message will ever name it. The
        // subscription fails as a call with a malformed response does, rather than wait.
        this.#forget(shared);
        shared.hub.error(
          new InternalError('Malformed response', {
            reason: taken
              ? "the subscribe was answered with another subscription's id"
              : 'the subscribe was answered with no subscription id',
          }),
        );
      },
      (err: unknown) => {
        // The client's call table full, or the server's for the connection: it goes when one of
        // the subscribes in flight settles (one sent at once would only be refused again).
        const full = err instanceof TooManyPendingCallsError || serverBusy(err);
        settled(full);
        if (generation !== shared.generation || !active(shared)) {
          // Its settling sent none of those waiting; nor will a retry of its own.
          if (full && line === this.#line) this.#unstall();
          return;
        }
        // A reply that still comes (the call timed out as the server took it) is stale: its
        // subscription is ended on the server, not left to pile up with each retry.
        shared.generation++;
        if (full && line === this.#line && this.#inFlight > 0) {
          // The table is full: it goes when one of the subscribes in flight frees a slot.
          this.#waiting.add(shared);
          return;
        }
        if (!this.caller.isClosed && transient(err)) {
          this.#retry(shared);
          return;
        }
        this.#forget(shared);
        shared.hub.error(err);
      },
    );
    this.onStatus?.();
  }

  /**
   * With none of the manager's subscribes in flight, none of those waiting would be sent (they
   * go as one settles): the first is retried with the backoff, and the rest follow it.
   */
  #unstall(): void {
    const first = this.#waiting.values().next();
    if (this.#inFlight > 0 || first.done) return;
    this.#waiting.delete(first.value);
    this.#retry(first.value);
  }

  /**
   * Subscribe again after a transient failure: with the client's backoff while connected,
   * else on the next open. Either way it resumes from the last message seen.
   */
  #retry(shared: Shared): void {
    if (!this.caller.isOpen) {
      shared.resubscribe = true;
      return;
    }
    const delay = this.caller.retryDelay(shared.retries++);
    this.logger.debug({ topic: shared.params[0], delay }, 'subscribe failed: retrying');
    shared.retryTimer = setTimeout(() => {
      shared.retryTimer = undefined;
      if (active(shared) && this.shared.get(shared.key) === shared) this.#start(shared);
    }, delay);
  }

  #stop(shared: Shared): void {
    this.#forget(shared);
    shared.generation++;
    shared.withdraw?.abort();
    shared.withdraw = undefined;
    stopRetry(shared);
    if (shared.serverId !== undefined) this.#sendUnsubscribe(shared.serverId);
    shared.serverId = undefined;
    // Those waiting for the window go if it has room. A subscribe refused for a full table sends
    // none of them when it settles (they would be refused too): they wait for its retry to get
    // through. The one stopped may have been that retry, and nothing else would send them.
    this.#pump();
    this.onStatus?.();
  }

  /** The connection's ids are over (it was lost, or the client closed): what they named goes. */
  #forgetIds(): void {
    this.#byServerId.clear();
    this.#dropOrphans();
    this.#retired.clear();
    this.#abandoned.clear();
  }

  /** `id` names a subscription of this connection again: its messages are that one's. */
  #letGo(id: SubscriptionId): void {
    this.#retired.delete(id);
    this.#abandoned.delete(id);
  }

  #forget(shared: Shared): void {
    if (this.shared.get(shared.key) === shared) {
      this.shared.delete(shared.key);
      if (shared.joined) this.#joinedHeld--;
    }
    if (shared.serverId !== undefined) this.#byServerId.delete(shared.serverId);
    this.#waiting.delete(shared);
  }

  /**
   * End `id` on the server; `settled` is called once the unsubscribe is answered or given up.
   * Sent on the connection the id is of, never on a later one (where the id may name another
   * subscription). Refused for a moment (the server's rate limit, the call table full, no answer
   * in time), it is sent again with the client's backoff while that connection lasts, at most
   * UNSUBSCRIBE_ATTEMPTS times: a subscription left on the server would go on taking the
   * connection's bytes and a place in its `maxSubscriptions`.
   */
  #sendUnsubscribe(id: SubscriptionId, settled?: () => void): void {
    const connection = this.caller.connection;
    if (!connection) return; // the server dropped it with the connection
    // Messages still on their way to this id are the old subscription's, even if the server
    // hands the id out again (a topic's shared id): until a subscribe reply names it again,
    // they are dropped.
    this.#takeOrphans(id);
    this.#orphanDrops.delete(id);
    this.#retired.set(id, (this.#retired.get(id) ?? 0) + 1);
    /** Its unsubscribe is over: answered (`answered`), or given up. */
    const done = (answered: boolean): void => {
      // The connection went meanwhile: it cleared what it held.
      if (this.caller.connection === connection) {
        const left = (this.#retired.get(id) ?? 0) - 1;
        if (left > 0) this.#retired.set(id, left);
        else if (this.#retired.delete(id) && !answered) {
          this.#abandoned.delete(id);
          this.#abandoned.add(id);
          trim(this.#abandoned, ABANDONED_IDS);
        }
      }
      settled?.();
    };
    const attempt = (made: number): void => {
      this.caller.callOn(connection, this.methods.unsubscribe, [id]).then(
        () => done(true),
        (err: unknown) => {
          if (
            made < UNSUBSCRIBE_ATTEMPTS &&
            momentary(err) &&
            this.caller.connection === connection
          ) {
            const timer = setTimeout(
              () => {
                this.#unsubscribeRetries.delete(timer);
                attempt(made + 1);
              },
              this.caller.retryDelay(made - 1),
            );
            this.#unsubscribeRetries.set(timer, settled);
            return;
          }
          this.logger.debug({ err, id }, 'unsubscribe failed');
          done(false);
        },
      );
    };
    attempt(1);
  }

  /**
   * Unsubscribes waiting to be sent again (#sendUnsubscribe), with what to call once each is
   * done: let go with their connection, which ends their subscriptions, and told as settled.
   */
  readonly #unsubscribeRetries = new Map<ReturnType<typeof setTimeout>, (() => void) | undefined>();

  #dropUnsubscribeRetries(): void {
    const retries = [...this.#unsubscribeRetries];
    this.#unsubscribeRetries.clear();
    for (const [timer, settled] of retries) {
      clearTimeout(timer);
      settled?.();
    }
  }

  /** A notification for `id`: to its subscription, or kept until the subscribe reply names it. */
  #route(id: SubscriptionId, update: SubscriptionUpdate, frameChars: number): void {
    const shared = this.#byServerId.get(id);
    if (shared) this.#deliver(shared, update);
    else if (!this.#retired.has(id) && !this.#abandoned.has(id)) {
      this.#keepOrphan(id, update, frameChars);
    }
  }

  #deliver(shared: Shared, update: SubscriptionUpdate): void {
    if (update.kind === 'error' || update.kind === 'complete') {
      // The last notification of a per-subscriber stream; messages the server skipped for a
      // slow consumer just before it are told first, as those no history holds are.
      this.#forget(shared);
      shared.serverId = undefined;
      if (update.missed) shared.hub.next({ data: undefined, gap: update.missed });
      if (update.kind === 'error') shared.hub.error(JsonRpcError.fromErrorObject(update.error));
      else shared.hub.complete();
      return;
    }
    if (update.kind === 'other') return;
    if (shared.unplaced && (update.kind !== 'message' || update.seq !== undefined)) {
      shared.unplaced = false;
      // A gap signal says what it means itself; before a position or message, the unknown.
      if (update.kind !== 'gap') this.#gapSeen(shared, null, false);
    }
    // The numbering the frame belongs to. Another than the one the last seq seen belongs to,
    // said on any frame but a gap signal (which says what it means itself): the topic is
    // numbered anew from 1, told as a gap of unknown size. Without a baseline (after a gap of
    // unknown size that named no epoch, say) there is nothing to tell: the epoch is learnt.
    const epoch = update.epoch ?? shared.epoch;
    if (
      epoch !== shared.epoch &&
      shared.checked &&
      shared.epoch !== undefined &&
      update.kind !== 'gap'
    ) {
      this.logger.warn({ epoch }, 'subscription: numbered anew');
      this.#gapSeen(shared, null, true);
    }
    shared.epoch = epoch;
    switch (update.kind) {
      case 'gap':
        this.logger.warn({ gap: update.gap }, 'subscription: messages lost beyond history');
        this.#gapSeen(shared, update.gap, update.epoch !== undefined);
        return;
      case 'position':
        // Where the subscription starts, or, later, that the messages up to it are not for this
        // subscriber (published `except` it): nothing to emit. One at or below the last seen
        // (a faulty server) moves nothing: what follows it up to there is a duplicate.
        if (shared.checked && update.seq <= (shared.lastSeq ?? -1)) return;
        shared.lastSeq = shared.startSeq = update.seq;
        shared.checked = true;
        return;
      case 'message': {
        const { seq, missed } = update;
        if (seq !== undefined && !this.#inSequence(shared, seq, missed ?? 0)) return;
        const event: SubscriptionEvent<unknown> = { data: update.result };
        if (seq !== undefined) {
          event.seq = seq;
          shared.lastSeq = seq;
          shared.checked = true;
        }
        if (missed !== undefined) event.missed = missed;
        shared.hub.next(event);
      }
    }
  }

  /**
   * A gap signal: `gap` messages are lost (null: unknown how many). Where the next message
   * starts, should the connection drop before it arrives: past the lost ones, or (an unknown
   * gap with an epoch: the topic is numbered anew, replayed from its start) before the new
   * first. An unknown gap without one leaves no baseline to check the next message against.
   */
  #gapSeen(shared: Shared, gap: number | null, withEpoch: boolean): void {
    // A count that would take the position past the safe integers (where no subscribe's
    // `since` may go) says no more than an unknown one.
    if (gap !== null && shared.lastSeq !== undefined && !isSequenceNumber(shared.lastSeq + gap))
      gap = null;
    if (gap !== null) {
      // What it covers was never delivered: a message there is no duplicate.
      if (shared.lastSeq !== undefined) shared.startSeq = shared.lastSeq += gap;
    } else if (withEpoch) {
      shared.lastSeq = shared.startSeq = 0;
      shared.checked = true;
    } else {
      shared.checked = false;
    }
    shared.hub.next({ data: undefined, gap });
  }

  /**
   * Continuity: a message's seq follows the last one seen, past the `missed` ones the server
   * skipped for a slow consumer. A duplicate (from `startSeq` up to the last seen: a replay's
   * overlap) is dropped. A seq below `startSeq` is no replay: the topic was numbered anew
   * without a new epoch, told as a gap of unknown size, and the message starts the count again.
   * A hole (messages missing with no signal) is filled by resubscribing from the last message
   * seen, which replays it from history or says with a gap signal what history no longer has;
   * past the budget, it is reported here as a gap signal of its size. False when the message
   * must not be emitted.
   */
  #inSequence(shared: Shared, seq: number, missed: number): boolean {
    if (!shared.checked || shared.lastSeq === undefined) {
      shared.startSeq = seq;
      return true;
    }
    if (seq <= shared.lastSeq) {
      if (seq >= shared.startSeq) {
        this.logger.debug({ seq, lastSeq: shared.lastSeq }, 'subscription: duplicate dropped');
        return false;
      }
      this.logger.warn({ seq, lastSeq: shared.lastSeq }, 'subscription: numbered anew');
      this.#gapSeen(shared, null, false);
      shared.startSeq = seq;
      return true;
    }
    const hole = seq - shared.lastSeq - 1 - missed;
    return hole <= 0 || this.#fill(shared, hole, seq);
  }

  /**
   * A hole of `hole` messages before `seq` (null: of unknown size, with no message yet to show
   * it): filled by resubscribing from the last message seen, within RESYNC_BUDGET; else told as
   * a gap signal of its size. False when resubscribing (the message that showed it, if any, is
   * not to be emitted: the resubscribe brings it).
   */
  #fill(shared: Shared, hole: number | null, seq?: number): boolean {
    const now = Date.now();
    shared.resyncs = shared.resyncs.filter((at) => now - at < RESYNC_WINDOW_MS);
    const id = shared.serverId;
    const resync = id !== undefined && this.caller.isOpen && shared.resyncs.length < RESYNC_BUDGET;
    // resync: resubscribing from the last one seen; else reported as a gap of `hole`.
    this.logger.warn(
      { topic: shared.params[0], lastSeq: shared.lastSeq, seq, hole, resync },
      'subscription: messages missing',
    );
    if (!resync) {
      this.#gapSeen(shared, hole, false);
      return true;
    }
    shared.resyncs.push(now);
    this.#byServerId.delete(id);
    shared.serverId = undefined;
    this.#sendUnsubscribe(id);
    this.#start(shared);
    return false;
  }

  /** Keep `update` for `id` until a subscribe reply names it, within the bounds (ORPHAN_IDS...). */
  #keepOrphan(id: SubscriptionId, update: SubscriptionUpdate, frameChars: number): void {
    if (this.#orphanChars + frameChars > ORPHAN_TEXT_CHARS)
      return this.#orphanDropped(id, [update]);
    let kept = this.#orphans.get(id);
    if (!kept) {
      if (this.#orphans.size >= ORPHAN_IDS) {
        const oldest = this.#orphans.keys().next().value!;
        this.#orphanDropped(oldest, this.#takeOrphans(oldest)!);
      }
      this.#orphans.set(id, (kept = { updates: [], chars: 0 }));
    }
    if (kept.updates.length >= ORPHANS_PER_ID) return this.#orphanDropped(id, [update]);
    kept.updates.push(update);
    kept.chars += frameChars;
    this.#orphanChars += frameChars;
  }

  /** The notifications kept for `id`, no longer kept. */
  #takeOrphans(id: SubscriptionId): SubscriptionUpdate[] | undefined {
    const kept = this.#orphans.get(id);
    if (!kept) return undefined;
    this.#orphans.delete(id);
    this.#orphanChars -= kept.chars;
    return kept.updates;
  }

  /**
   * Count those of `updates`, dropped for `id`, that no sequence number tells of: NaN when one
   * of them moved the count (see #orphanDrops).
   */
  #orphanDropped(id: SubscriptionId, updates: SubscriptionUpdate[]): void {
    let count = 0;
    for (const update of updates)
      if (update.kind === 'message' || update.kind === 'gap')
        count += update.kind === 'message' && update.seq === undefined ? 1 : NaN;
    if (count === 0) return;
    const drops = this.#orphanDrops;
    drops.set(id, (drops.get(id) ?? 0) + count);
    trim(drops, DROP_COUNT_IDS);
  }

  #dropOrphans(): void {
    this.#orphans.clear();
    this.#orphanChars = 0;
    this.#orphanDrops.clear();
  }
}

import type { Observable } from 'rxjs';
import { Hub } from '../peer/hub.js';
import type { Logger } from '../peer/logger.js';
import { nameOf } from '../peer/method-descriptor.js';
import type {
  MethodDescriptor,
  NotificationDescriptor,
  ParamsArgs,
  SubscriptionDescriptor,
} from '../peer/method-descriptor.js';
import { HandlerTable } from '../peer/method-registry.js';
import { composeMiddleware } from '../peer/middleware.js';
import type { Handler } from '../peer/method-registry.js';
import { notificationsNamed } from '../peer/notifications.js';
import { PeerCore as Peer } from '../peer/peer-core.js';
import type { BatchEntry } from '../peer/peer-core.js';
import type { Reply } from '../peer/replies.js';
import type { IncomingNotification } from '../peer/notifications.js';
import type { CloseInfo, PeerConfig } from '../peer/peer-options.js';
import type { CallOptions } from '../peer/pending-calls.js';
import type { Incoming } from '../protocol/classify.js';
import { encodeNotification, encodeRequest } from '../protocol/encode.js';
import { idTextsByScan } from '../protocol/id-text.js';
import { NotConnectedError } from '../protocol/local-errors.js';
import { ReservedMethod } from '../protocol/reserved.js';
import type { Params, RequestId } from '../protocol/types.js';
import { ErrorCode } from '../protocol/error-codes.js';
import type { WebSocketLike } from '../transport/websocket-transport.js';
import { authFailureOf, refusalOf } from './authentication.js';
import type { AuthenticateResult, DisconnectEvent } from './authentication.js';
import { backoffDelay, defaultBackoff } from './backoff.js';
import { ClientConnection } from './client-connection.js';
import { usableToken } from './dial.js';
import { resolveClientOptions } from './client-options.js';
import type { ClientConfig, ClientOptions } from './client-options.js';
import type { ConnectionState } from './connection-state.js';
import { readHistory } from './history.js';
import type { HistoryOptions, HistoryResult } from './history.js';
import { ClientInbox } from './inbox.js';
import type { InboxGap } from './inbox.js';
import { OfflineQueue } from './offline-queue.js';
import { presenceState } from './presence.js';
import { SharedRun, whileWanted } from './wanted.js';
import type { PresenceState } from './presence.js';
import { ClientSubscriptions, managers } from './subscriptions.js';
import type { JoinedSubscription, SubscriptionEvent } from './subscriptions.js';

// Moved out with the connection lifecycle and the options; still imported from here.
export { HEARTBEAT_CLOSE_CODE } from './client-connection.js';
export type { ClientConfig, ClientOptions } from './client-options.js';

/**
 * The client's end of a connection. A subscription's messages, the bulk of what a client
 * reads, go from the frame straight to their subscription: not through the handlers and the
 * notifications the application observes (a notification of the subscription method that names
 * no subscription still does).
 */
class ClientPeer extends Peer<RpcClient> {
  // Set before the client's first connection (see the RpcClient constructor).
  readonly #subscriptions = managers.get(this.session)!;
  /** The characters of the frame being read (what a notification kept for later counts). */
  #frameChars = 0;

  override receive(text: string): void {
    this.#frameChars = text.length;
    super.receive(text);
  }

  protected override handle(message: Incoming): Reply | Promise<Reply> {
    const subscriptions = this.#subscriptions;
    if (message.kind === 'failure') {
      return message.error.code === ErrorCode.ShuttingDown &&
        resenders.get(this.session)!(this, message.id)
        ? undefined
        : super.handle(message);
    }
    return message.kind === 'notification' &&
      message.method === subscriptions.methods.notification &&
      subscriptions.handleNotification(message.params, this.#frameChars)
      ? undefined
      : super.handle(message);
  }

  /**
   * A call lost with a connection the server closed for its credentials rejects with
   * AuthenticationError; any other close, as every peer's calls do.
   */
  protected override lostCallError(info: CloseInfo): Error {
    return authFailureOf(info) ?? super.lostCallError(info);
  }
}

/**
 * Each client's way to send again a call its server refused -32006 (Shutting down) on a
 * connection it asked the client to leave: true when taken (see RpcClient's #resend).
 */
const resenders = new WeakMap<
  RpcClient,
  (peer: Peer<RpcClient>, id: RequestId | null) => boolean
>();

/** The server's calls a client runs at once; one more is answered -32000 Server busy. */
export const CLIENT_MAX_IN_FLIGHT = 256;

/**
 * Each client's offline queue and stop signal, for `queuedIn` and `stoppedWith`. A map filled by the constructor rather than a
 * static block reading the private field: a static block runs when the module loads, so a
 * bundler keeps the whole client wherever this module is imported (the shared client's tab,
 * whose fallback is loaded on demand, would ship it).
 */
const internals = new WeakMap<RpcClient, { queue: OfflineQueue; stopped: AbortSignal }>();

/**
 * How many calls and notifications wait in `client`'s offline queue. For the shared worker's
 * host, which bounds each tab's share of it; not part of the client's API.
 */
export function queuedIn(client: RpcClient): number {
  return internals.get(client)?.queue.size ?? 0;
}

/**
 * Why `client` stopped for good (credentials refused, reconnects exhausted, close()), once it
 * has: for the shared worker's host, which tells its tabs. Not part of the client's API.
 */
export function stoppedWith(client: RpcClient): unknown {
  const stopped = internals.get(client)?.stopped;
  return stopped?.aborted ? stopped.reason : undefined;
}

/**
 * A JSON-RPC 2.0 client over WebSocket for browsers and Node. It connects on
 * construction, reconnects by itself, answers the server's calls from its own
 * registry, and exposes notifications and its connection state as Observables
 * that live across reconnects.
 */
export class RpcClient {
  /** The handlers of the calls and notifications the server sends (see `method`). */
  readonly registry = new HandlerTable<RpcClient>();
  readonly #logger: Logger;
  readonly #queue: OfflineQueue;
  readonly #notificationSubject = new Hub<IncomingNotification>();
  readonly #subscriptions: ClientSubscriptions;
  /** The socket, the Peer over it, and reconnecting: everything but the calls. */
  readonly #connection: ClientConnection<RpcClient>;

  /** The connection state; replays the current one to each new subscriber. */
  readonly state$: Observable<ConnectionState>;
  /** Every notification the server sends, across reconnects. */
  readonly notifications$: Observable<IncomingNotification> = this.#notificationSubject.observable;
  /**
   * With `inbox: true`, messages to the user that will never arrive (lost past the server's
   * retention): refetch. Completes when the client closes, or at once without an inbox.
   */
  readonly inboxGaps$: Observable<InboxGap>;
  /**
   * Each subscription the server makes for this client (`session.join`, `rpc.joined`), as it is
   * announced: its topic and its messages. The client keeps it like its own (resumed after a
   * reconnect, on any node, from the last message seen) until the server ends it
   * (`session.leave`: the Observable completes) or the client closes. Completes when the client
   * closes.
   */
  readonly joined$: Observable<JoinedSubscription>;
  /** The `$inbox` subscription (ClientOptions.inbox). */
  readonly #inbox: ClientInbox<RpcClient>;

  /**
   * Why each connection, or attempt at one, ended: close code and reason, the HTTP status of a
   * refused upgrade (Node), the error (an AuthenticationError when the credentials were
   * refused), and whether the client dials again. Completes when the client closes.
   */
  readonly disconnects$: Observable<DisconnectEvent>;

  /** The options, checked and with their defaults filled in (`resolveClientOptions`); frozen. */
  readonly config: ClientConfig;

  constructor(options: ClientOptions) {
    const config = resolveClientOptions(options);
    this.config = config;
    this.#logger = config.logger;
    const getToken = config.getToken;
    // The server asks for a fresh token before the session's identity expires (rpc.token).
    // Requests that come while one is being fetched share it, so a server flooding rpc.token
    // costs one getToken. The fetch is wanted while any request sharing it is: each request is
    // over as soon as it is given up (cancelled, or its connection closed), and getToken's signal
    // aborts once the last of them is, so a getToken that never settles holds nobody and the
    // next request calls getToken again.
    const fetching = new SharedRun<string>();
    const freshToken: Handler<RpcClient> = async (_params, { signal }) => ({
      token: usableToken(await fetching.want(signal, getToken!)),
    });
    const reservedMethods = getToken ? new Map([[ReservedMethod.Token, freshToken]]) : undefined;
    // One config for every connection's peer.
    const peerConfig: PeerConfig<RpcClient> = {
      registry: this.registry,
      callTimeoutMs: config.callTimeoutMs,
      maxPendingCalls: config.maxPendingCalls,
      maxInFlight: CLIENT_MAX_IN_FLIGHT,
      exposeErrorDetails: false,
      parse: {},
      idTexts: idTextsByScan,
      batchOutgoing: config.batchCalls,
      onReservedNotification: (method, params) => {
        if (method === ReservedMethod.Joined) this.#subscriptions.handleJoined(params);
        else this.#connection.onReservedNotification(method, params);
      },
      reservedMethods,
      middleware: composeMiddleware(config.middleware),
    };
    this.#connection = new ClientConnection<RpcClient>(config, this.#logger, {
      createPeer: (transport) => {
        const peer = new ClientPeer(transport, { session: this, logger: this.#logger }, peerConfig);
        peer.notifications$.subscribe((n) => this.#notificationSubject.next(n));
        return peer;
      },
      opened: () => {
        this.#subscriptions.connectionOpened();
        this.#flushQueue();
      },
      lost: () => this.#subscriptions.connectionLost(),
      closing: (why) => {
        this.#queue.failAll(why);
        this.#subscriptions.closeAll();
      },
      closed: () => this.#notificationSubject.complete(),
    });
    this.state$ = this.#connection.state$;
    this.disconnects$ = this.#connection.disconnects$;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- read by the getter below
    const client = this;
    const backoff = this.#connection.backoff;
    this.#queue = new OfflineQueue(config.maxQueued, () => this.#connection.lastFailure);
    internals.set(this, { queue: this.#queue, stopped: this.#connection.stopped.signal });
    this.#subscriptions = new ClientSubscriptions(
      {
        call: (method, params) => this.call(method, params),
        get connection() {
          return client.#livePeer();
        },
        callOn: (connection, method, params) =>
          connection === this.#livePeer()
            ? (connection as Peer<RpcClient>).call(method, params)
            : Promise.reject(new NotConnectedError('Not connected')),
        subscribe: (method, params, onAccepted, withdrawn) =>
          this.#callUntimedWhileQueued(method, params, onAccepted, withdrawn),
        retryDelay: (attempt) =>
          backoffDelay(attempt, backoff === false ? defaultBackoff : backoff),
        get isOpen() {
          return client.#livePeer() !== undefined;
        },
        get isClosed() {
          return client.state === 'closed';
        },
      },
      config.subscriptionMethods,
      this.#logger,
      { maxJoined: config.maxJoined, maxPendingCalls: config.maxPendingCalls },
    );
    this.#inbox = new ClientInbox<RpcClient>({
      subscribeWithMeta: (topic) => this.subscribeWithMeta(topic),
      registry: this.registry,
      session: this,
      emit: (notification) => this.#notificationSubject.next(notification),
      logger: this.#logger,
    });
    this.inboxGaps$ = this.#inbox.gaps$;
    this.joined$ = this.#subscriptions.joined$;
    managers.set(this, this.#subscriptions);
    resenders.set(this, (peer, id) => this.#resend(peer, id));
    // Before anything else, so that its subscribe is the first call of every connection.
    this.#inbox.start(config.inbox);
    this.#connection.connect();
  }

  get state(): ConnectionState {
    return this.#connection.state;
  }

  /** The URL of the current (or next) connection. */
  get url(): string {
    return this.#connection.url;
  }

  /** The current socket. Unused here; tests reach for it to count its writes. */
  private get socket(): WebSocketLike | undefined {
    return this.#connection.socket;
  }

  /** The last ending of a connection or attempt (see `disconnects$`); undefined before one. */
  get lastDisconnect(): DisconnectEvent | undefined {
    return this.#connection.lastDisconnect;
  }

  /**
   * Resolves when the client is connected; rejects if it is closed first (with
   * AuthenticationError when it stopped because the server refused its credentials, with
   * ReconnectFailedError when `reconnect.maxAttempts` reconnects in a row failed). Calls
   * made while it is not connected share one promise: an app that asks again and again through
   * a long outage (each with a timeout of its own) adds nothing per call.
   */
  opened(): Promise<void> {
    return (this.#opened ??= this.#connection.stateHub
      .first((s) => s === 'open' || s === 'closed')
      .then((state) => {
        this.#opened = undefined;
        if (state !== 'open') throw this.#closedError();
      }));
  }

  #opened: Promise<void> | undefined;

  /**
   * Present a new token on the connection (`rpc.authenticate`): the server checks it and
   * replaces the session's identity; subscriptions go on. Default: a token from `getToken`.
   * Rejects with AuthenticationError when the server refuses it (the old identity stays).
   * While disconnected it waits for the next connection like any call.
   */
  async authenticate(token?: string): Promise<AuthenticateResult> {
    const getToken = this.config.getToken;
    if (token === undefined && !getToken) {
      throw new TypeError('authenticate() needs a token, or a getToken option to ask for one');
    }
    // Over at close(): a getToken that hangs does not hold authenticate() beyond the client.
    const signal = this.#connection.stopped.signal;
    const params = { token: usableToken(token ?? (await whileWanted(signal, getToken!))) };
    try {
      return (await this.call(ReservedMethod.Authenticate, params)) as AuthenticateResult;
    } catch (err) {
      throw refusalOf(err) ?? err;
    }
  }

  /** Register a handler the server can call (`session.call(...)`). */
  method<P extends Params | undefined, R>(
    descriptor: MethodDescriptor<P, R> | string,
    handler: Handler<RpcClient, P, R>,
  ): () => void {
    return this.registry.method(descriptor, handler);
  }

  notificationsOf<P extends Params | undefined>(
    descriptor: NotificationDescriptor<P> | string,
  ): Observable<P> {
    return notificationsNamed(this.notifications$, descriptor);
  }

  call<P extends Params | undefined, R>(
    descriptor: MethodDescriptor<P, R>,
    ...args: ParamsArgs<P, [options?: CallOptions]>
  ): Promise<R>;
  call(method: string, params?: Params, options?: CallOptions): Promise<unknown>;
  call(
    target: MethodDescriptor<Params | undefined, unknown> | string,
    params?: Params,
    options?: CallOptions,
  ): Promise<unknown> {
    const method = nameOf(target);
    const peer = this.#sendingPeer();
    if (peer) return peer.call(method, params, options);
    return this.#throughQueue(
      method,
      options ?? {},
      () => encodeRequest(0, method, params),
      (timeoutMs) => this.#requirePeer().call(method, params, { ...options, timeoutMs }),
    );
  }

  /**
   * Send a notification; while disconnected it is queued (or throws, with `whenDisconnected:
   * 'reject'`). Params that cannot be sent throw, sending nothing: a TypeError when they are not
   * JSON (a BigInt, a cycle), an UnencodableMessageError when they nest too deep for the binary
   * `encoding` (515 levels with the envelope).
   */
  notify<P extends Params | undefined>(
    descriptor: NotificationDescriptor<P>,
    ...args: ParamsArgs<P>
  ): void;
  notify(method: string, params?: Params): void;
  notify(target: NotificationDescriptor<Params | undefined> | string, params?: Params): void {
    const method = nameOf(target);
    const peer = this.#sendingPeer();
    if (peer) return peer.notify(method, params);
    if (!this.#livePeer()) this.#assertMayQueue();
    // Params that cannot be encoded throw now, as they do while connected, not in the flush:
    // as JSON, and in the binary encoding asked for (too deep for it: UnencodableMessageError).
    const frame = encodeNotification(method, params);
    this.config.encoding?.toBinary(frame);
    // A full queue throws, as a call made now rejects: nothing else would tell of it.
    if (this.#queue.full) throw this.#queue.fullError();
    // Queued, it has no caller waiting: a failure to send it later (the client closed first) is
    // logged.
    this.#queue
      .enqueue(
        method,
        { timeoutMs: 0 },
        0,
        () => {
          this.#requirePeer().notify(method, params);
          return Promise.resolve();
        },
        0,
      )
      .catch((err: unknown) => this.#logger.warn({ err, method }, 'queued notification dropped'));
    this.#flushQueue();
  }

  /**
   * Subscribe to a topic or per-subscriber stream. The Observable is cold and
   * shared: the first Observer subscribes on the server, the last one's
   * unsubscribe ends it there, and it is re-established after every reconnect.
   * A rejected subscribe arrives as an error (a JsonRpcError); a stream's end
   * as completion.
   */
  subscribe<P, T>(descriptor: SubscriptionDescriptor<P, T>, ...args: ParamsArgs<P>): Observable<T>;
  subscribe<T = unknown>(topic: string, params?: unknown): Observable<T>;
  subscribe(target: SubscriptionDescriptor | string, params?: unknown): Observable<unknown> {
    return this.#subscriptions.observeMessages(nameOf(target), params);
  }

  /** Like `subscribe`, with each message's sequence number and missed count. */
  subscribeWithMeta<T = unknown>(
    topic: string,
    params?: unknown,
  ): Observable<SubscriptionEvent<T>> {
    return this.#subscriptions.observe<T>(topic, params);
  }

  /**
   * Who is subscribed to `topic` (declared with `presence` on the server), on every node: the
   * count and member list, a new value at each join/leave event (`$presence`, docs/pubsub.md).
   */
  presence(topic: string): Observable<PresenceState> {
    return presenceState((name, params) => this.subscribe(name, params), topic);
  }

  /**
   * The subscription to `topic` this client has, its own (`subscribe(topic)`, while observed) or
   * one the server made (`joined$`), as `subscribeWithMeta` gives messages; undefined when it
   * has neither. Observing it never subscribes anew.
   */
  subscriptionOf<T = unknown>(topic: string): Observable<SubscriptionEvent<T>> | undefined {
    return this.#subscriptions.subscriptionOf(topic) as
      Observable<SubscriptionEvent<T>> | undefined;
  }

  /**
   * A page of `topic`'s retained history (the gateway's `history` method, authorized like a
   * subscribe): the last `last` messages, or those after `since`, at most `limit` (100).
   */
  history<T = unknown>(topic: string, options: HistoryOptions = {}): Promise<HistoryResult<T>> {
    const method = this.config.subscriptionMethods.history ?? 'history';
    return readHistory<T>((name, params) => this.call(name, params), method, topic, options);
  }

  /** Send calls and notifications in one frame; one settled result per entry, in order. */
  batch(
    entries: readonly BatchEntry[],
    options: CallOptions = {},
  ): Promise<PromiseSettledResult<unknown>[]> {
    const peer = this.#sendingPeer();
    if (peer) return peer.batch(entries, options);
    return this.#throughQueue(
      'batch',
      options,
      () => {
        for (const entry of entries) encodeRequest(0, entry.method, entry.params);
      },
      (timeoutMs) => this.#requirePeer().batch(entries, { ...options, timeoutMs }),
      entries.filter((entry) => !entry.notification).length,
    );
  }

  /** Close for good: pending and queued calls reject, no reconnect follows. */
  close(): Promise<void> {
    return this.#connection.close();
  }

  #livePeer(): Peer<RpcClient> | undefined {
    return this.#connection.livePeer();
  }

  #requirePeer(): Peer<RpcClient> {
    const peer = this.#livePeer();
    if (!peer) throw new NotConnectedError('Not connected');
    return peer;
  }

  /**
   * Why calls fail once closed: the refusal of the credentials, the reconnects exhausted
   * (ReconnectFailedError), or close().
   */
  #closedError(): Error {
    return this.#connection.stopped.signal.reason as Error;
  }

  #assertMayQueue(): void {
    if (this.state === 'closed') throw this.#closedError();
    if (this.config.whenDisconnected === 'reject') throw new NotConnectedError('Not connected');
  }

  /**
   * Queue a call made while disconnected, or while connected behind queued calls waiting for
   * room (sent in turn, at once if it fits). `check` encodes it first, so params that cannot be
   * serialised reject now, as they do while connected, instead of failing in the flush.
   */
  #throughQueue<T>(
    method: string,
    options: CallOptions,
    check: () => void,
    send: (timeoutMs: number) => Promise<T>,
    slots?: number,
    ahead?: boolean,
  ): Promise<T> {
    try {
      if (!this.#livePeer()) this.#assertMayQueue();
      check();
    } catch (err) {
      return Promise.reject(err as Error);
    }
    const queued = this.#queue.enqueue(
      method,
      options,
      this.config.callTimeoutMs,
      send,
      slots,
      ahead,
    );
    this.#flushQueue();
    return queued;
  }

  /**
   * The peer to send on at once: connected, with nothing queued before (calls waiting for room
   * in the call table go first, in order; past maxQueued, at once, to meet the table's own
   * refusal).
   */
  #sendingPeer(): Peer<RpcClient> | undefined {
    const queue = this.#queue;
    return queue.size === 0 || queue.full ? this.#livePeer() : undefined;
  }

  /**
   * A call the server refused -32006 on a connection it asked us to leave (the notice, then the
   * refusal of a call that crossed it on the wire) never ran there: it waits in the queue, with
   * what is left of its timeout and its signal, for the next connection (sent at once if that is
   * open already). False, for the refusal to reach the caller, when it is not such a call (a
   * batch's, or on a connection still in use) or the queue is full.
   */
  #resend(peer: Peer<RpcClient>, id: RequestId | null): boolean {
    if (id === null || !this.#connection.isRetiring(peer) || this.#queue.full) return false;
    // An unsubscribe names a subscription of this connection, which ends with it: sent on the
    // next, its id could name another.
    if (peer.pendingMethod(id) === this.#subscriptions.methods.unsubscribe) return false;
    const call = peer.withdrawCall(id);
    if (!call) return false;
    const { method, params, signal, onResult } = call;
    this.#queue
      .enqueue(
        method,
        { timeoutMs: call.timeoutMs, signal },
        0,
        (timeoutMs) => this.#requirePeer().call(method, params, { timeoutMs, signal, onResult }),
        1,
        true,
      )
      .then(call.resolve, call.reject);
    this.#flushQueue();
    return true;
  }

  /**
   * Send what the queue holds, as much as the call table has room for; while some waits, each
   * call that settles sends more (once a turn), so a queued call never finds the table full.
   */
  #flushQueue(): void {
    const peer = this.#livePeer();
    if (!peer) return;
    const waiting = this.#queue.flush(
      peer.callRoom,
      this.config.maxPendingCalls,
      () => this.#livePeer() === peer,
    );
    peer.onCallSettled(waiting ? this.#roomMade : undefined);
  }

  #flushDue = false;
  readonly #roomMade = (): void => {
    if (this.#flushDue) return;
    this.#flushDue = true;
    queueMicrotask(() => {
      this.#flushDue = false;
      this.#flushQueue();
    });
  };

  /**
   * A subscribe: while disconnected it waits in the queue without a timeout (it is the
   * resubscription the next connection needs, however long that takes), until `withdrawn`
   * takes it out (no one wants it any more); once sent, the default callTimeoutMs applies and
   * `withdrawn` does nothing (its reply is unsubscribed when it comes). Connected, it goes ahead
   * of the calls still queued (a reconnect's resubscribes go first): at once while the call table
   * has room, else first in the queue, for the next slot that frees (sent at once, it would be
   * refused, and its retries would find every freed slot taken by the queue's next call).
   */
  #callUntimedWhileQueued(
    method: string,
    params: Params,
    onResult: (result: unknown) => void,
    withdrawn: AbortSignal,
  ): Promise<unknown> {
    const peer = this.#livePeer();
    if (peer && (this.#queue.size === 0 || peer.callRoom > 0)) {
      return peer.call(method, params, { onResult });
    }
    return this.#throughQueue(
      method,
      { timeoutMs: 0, signal: withdrawn },
      () => encodeRequest(0, method, params),
      () => this.#requirePeer().call(method, params, { onResult }),
      1,
      peer !== undefined,
    );
  }
}

/** Create a client; it starts connecting at once. */
export function createClient(options: ClientOptions): RpcClient {
  return new RpcClient(options);
}

// The tab's side: the RpcClient surface a page uses (call, notify, subscribe, subscription
// status, handlers of server-to-client calls, connection state), carried over a MessagePort to
// the SharedWorker that holds the one connection. Where SharedWorker is missing, or the worker
// does not start or answer in time, the same worker side runs in the tab over a MessageChannel:
// one connection per tab, behind the same API, loaded only then.
import { Observable } from 'rxjs';
import type { Subscriber } from 'rxjs';
import type { HandlerContext } from '../../peer/handler-context.js';
import { Hub } from '../../peer/hub.js';
import { silentLogger } from '../../peer/logger.js';
import { nameOf } from '../../peer/method-descriptor.js';
import type {
  MethodDescriptor,
  NotificationDescriptor,
  ParamsArgs,
  SubscriptionDescriptor,
} from '../../peer/method-descriptor.js';
import { HandlerTable } from '../../peer/method-registry.js';
import type { Handler } from '../../peer/method-registry.js';
import { notificationsNamed } from '../../peer/notifications.js';
import type { IncomingNotification } from '../../peer/notifications.js';
import type { CallOptions } from '../../peer/pending-calls.js';
import type { BatchEntry } from '../../peer/peer-core.js';
import {
  CancelledError,
  ConnectionClosedError,
  NotConnectedError,
} from '../../protocol/local-errors.js';
import { encodeNotification } from '../../protocol/encode.js';
import { InternalError } from '../../protocol/errors.js';
import { ReservedMethod } from '../../protocol/reserved.js';
import type { Params } from '../../protocol/types.js';
import { AuthenticationError } from '../authentication.js';
import type { AuthenticateResult, DisconnectEvent } from '../authentication.js';
import { clientDefaults } from '../client-options.js';
import type { ClientOptions } from '../client-options.js';
import type { ConnectionState } from '../connection-state.js';
import type { HistoryOptions, HistoryResult } from '../history.js';
import type { InboxGap } from '../inbox.js';
import { presenceState } from '../presence.js';
import type { PresenceState } from '../presence.js';
import { messagesOf } from '../subscription-messages.js';
import type { SubscriptionStatus } from '../subscription-status.js';
import type { JoinedSubscription, SubscriptionEvent } from '../subscriptions.js';
import { otherVersionError, readSent, sentParams, SHARED_PROTOCOL_VERSION } from './messages.js';
import type { HostMessage, TabMessage, WireSettled } from './messages.js';
import { resolveSharedClientOptions } from './options.js';
import type { SharedClientConfig, SharedClientOptions } from './options.js';
import { fromWire, toWire } from './wire-errors.js';
import type { WireError } from './wire-errors.js';

/** A call this tab made, waiting for its result. */
interface PendingCall {
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** A subscription or status observer of this tab: what to post again after `gone`. */
interface Stream {
  message: Extract<TabMessage, { t: 'sub' | 'status' | 'joins' | 'jsub' | 'gaps' }>;
  subscriber: Subscriber<unknown>;
}

/** Page lifecycle events the tab listens to (absent outside a window). */
interface PageScope {
  addEventListener(type: string, listener: (event: { persisted?: boolean }) => void): void;
  removeEventListener(type: string, listener: (event: { persisted?: boolean }) => void): void;
}

/**
 * One tab's client of the connection a SharedWorker holds for every tab of the origin (see
 * `createSharedClient`). The surface is RpcClient's: what differs is in docs/shared-connection.md.
 */
export class SharedRpcClient {
  /** This tab's handlers of the calls and notifications the server sends (see `method`). */
  readonly registry = new HandlerTable<SharedRpcClient>();
  readonly #config: SharedClientConfig;
  #port!: MessagePort;
  #viaWorker = false;
  /** Whether the other side has answered on this port yet. */
  #ready = false;
  /**
   * What the tab posted while it has not answered, hello and bye aside: held (as cloned) until it
   * does, so a worker that answers only after the tab took the fallback runs none of it.
   */
  #outbox: TabMessage[] = [];
  /** When the worker is taken as failed if it has not answered (see `#workerFailed`). */
  #deadline: ReturnType<typeof setTimeout> | undefined;
  #nextId = 0;
  readonly #calls = new Map<number, PendingCall>();
  readonly #streams = new Map<number, Stream>();
  /** Runs of this tab's handlers, by the worker's id: how to abort each. */
  readonly #running = new Map<number, (reason?: unknown) => void>();
  readonly #state = new Hub<ConnectionState>('connecting', true);
  readonly #disconnects = new Hub<DisconnectEvent>();
  readonly #notifications = new Hub<IncomingNotification>();
  #lastDisconnect: DisconnectEvent | undefined;
  #closedError: Error | undefined;
  /**
   * What the worker's client does with a notification while not connected: the worker's
   * setting (told in its welcome), which may be its script's or an earlier tab's; this tab's own
   * until then.
   */
  #whenDisconnected: ClientOptions['whenDisconnected'];
  /** Said bye on pagehide: say hello again if the page comes back from the cache. */
  #away = false;
  /**
   * Said hello again and heard nothing since: a 'gone' read now answers something posted
   * before that hello (the host reads a port in order), so it is not a reason to start over.
   */
  #greeting = false;
  readonly #page: PageScope | undefined;
  readonly #onPageHide = (): void => {
    this.#away = true;
    this.#port.postMessage({ t: 'bye' } satisfies TabMessage);
  };
  readonly #onPageShow = (event: { persisted?: boolean }): void => {
    // Not away any more when a 'gone' read first made it start over already.
    if (event.persisted && this.#away) this.#reattach();
  };

  /** The connection state, as the worker's client has it; replays the current one. */
  readonly state$: Observable<ConnectionState> = this.#state.observable;
  /** Why each connection, or attempt at one, ended; completes when this tab's client closes. */
  readonly disconnects$: Observable<DisconnectEvent> = this.#disconnects.observable;
  /** Every notification the server sends (each tab gets each one). */
  readonly notifications$: Observable<IncomingNotification> = this.#notifications.observable;
  /**
   * Each subscription the server makes for the connection (`session.join`), as it is announced
   * while this tab observes: its topic and its messages (`joined$` of the worker's client; every
   * observing tab gets each one). Completes when this tab's client closes.
   */
  readonly joined$: Observable<JoinedSubscription> = this.#stream<JoinedSubscription>((id) => ({
    t: 'joins',
    id,
  }));
  /**
   * With `inbox: true`, messages to the user that will never arrive (`inboxGaps$` of the
   * worker's client). Completes when this tab's client closes, or at once without an inbox.
   */
  readonly inboxGaps$: Observable<InboxGap> = this.#stream<InboxGap>((id) => ({ t: 'gaps', id }));

  constructor(options: SharedClientOptions) {
    const config = resolveSharedClientOptions(options);
    this.#config = config;
    this.#whenDisconnected = config.forwarded.whenDisconnected;
    const make =
      config.worker ??
      (typeof SharedWorker === 'function'
        ? () => new SharedWorker(config.workerUrl!, { name: config.name })
        : undefined);
    let failure: unknown = new TypeError('SharedWorker is not available here');
    if (make) {
      try {
        const worker = make();
        worker.addEventListener?.('error', () => this.#workerFailed('failed to start'));
        this.#viaWorker = true;
        this.#attach(worker.port);
        // A script the host answers with something else (an SPA's index.html) fires `error` in
        // the tab that started the worker only: a tab attaching to it later hears nothing.
        const ms = Math.min(
          config.forwarded.connectTimeoutMs ?? clientDefaults.connectTimeoutMs,
          2 ** 31 - 1,
        );
        this.#deadline = setTimeout(() => this.#workerFailed(`did not answer within ${ms} ms`), ms);
      } catch (err) {
        failure = err;
      }
    }
    if (!this.#viaWorker) {
      if (config.fallback === 'throw') throw failure;
      this.#fallBack();
    }
    const page = globalThis as Partial<PageScope>;
    this.#page = typeof page.addEventListener === 'function' ? (page as PageScope) : undefined;
    this.#page?.addEventListener('pagehide', this.#onPageHide);
    this.#page?.addEventListener('pageshow', this.#onPageShow);
  }

  /** Whether the connection is the SharedWorker's (false: this tab's own, the fallback). */
  get shared(): boolean {
    return this.#viaWorker;
  }

  get state(): ConnectionState {
    return this.#state.value!;
  }

  /** The last ending of a connection or attempt (see `disconnects$`); undefined before one. */
  get lastDisconnect(): DisconnectEvent | undefined {
    return this.#lastDisconnect;
  }

  /**
   * Resolves when the connection is open; rejects if this client is closed first. Calls made
   * while it is not open share one promise, as RpcClient's do: asked again and again through a
   * long outage, it adds nothing per call.
   */
  opened(): Promise<void> {
    return (this.#opened ??= this.#state
      .first((s) => s === 'open' || s === 'closed')
      .then((state) => {
        this.#opened = undefined;
        if (state !== 'open') throw this.#closedError ?? new NotConnectedError('Client closed');
      }));
  }

  #opened: Promise<void> | undefined;

  call<P extends Params | undefined, R>(
    descriptor: MethodDescriptor<P, R>,
    ...args: ParamsArgs<P, [options?: SharedCallOptions]>
  ): Promise<R>;
  call(method: string, params?: Params, options?: SharedCallOptions): Promise<unknown>;
  call(
    target: MethodDescriptor<Params | undefined, unknown> | string,
    params?: Params,
    options: SharedCallOptions = {},
  ): Promise<unknown> {
    const method = nameOf(target);
    const timeoutMs = options.timeoutMs ?? options.timeout;
    return this.#request(method, options.signal, (id) => {
      const call: TabMessage = { t: 'call', id, method, params: sentParams(params) };
      if (timeoutMs !== undefined) call.timeoutMs = timeoutMs;
      return call;
    });
  }

  /**
   * Send calls and notifications in one frame (`batch` of the worker's client); one settled
   * result per entry, in order, each error with its class.
   */
  async batch(
    entries: readonly BatchEntry[],
    options: SharedCallOptions = {},
  ): Promise<PromiseSettledResult<unknown>[]> {
    const timeoutMs = options.timeoutMs ?? options.timeout;
    const results = (await this.#request('batch', options.signal, (id) => {
      const batch: TabMessage = {
        t: 'batch',
        id,
        entries: entries.map(({ method, params: given, notification }) => {
          const params = sentParams(given);
          return notification ? { method, params, notification } : { method, params };
        }),
      };
      if (timeoutMs !== undefined) batch.timeoutMs = timeoutMs;
      return batch;
    })) as WireSettled[];
    return results.map((r) =>
      r.status === 'fulfilled' ? r : { status: 'rejected', reason: fromWire(r.reason) },
    );
  }

  /**
   * A page of `topic`'s retained history, read by the worker's client (`history`): the last
   * `last` messages, or those after `since`, at most `limit` (100).
   */
  history<T = unknown>(topic: string, options: HistoryOptions = {}): Promise<HistoryResult<T>> {
    return this.#request('history', undefined, (id) => ({
      t: 'history',
      id,
      topic,
      options: { ...options },
    })) as Promise<HistoryResult<T>>;
  }

  /**
   * Present a new token on the shared connection (`authenticate` of the worker's client): the
   * session's identity changes for every tab. Without `token`, the worker's getToken is asked
   * (a tab's, or the worker script's). Rejects with AuthenticationError when refused.
   */
  authenticate(token?: string): Promise<AuthenticateResult> {
    return this.#request('rpc.authenticate', undefined, (id) =>
      token === undefined ? { t: 'auth', id } : { t: 'auth', id, token },
    ) as Promise<AuthenticateResult>;
  }

  /**
   * Who is subscribed to `topic` (declared with `presence` on the server): the count and
   * member list, over one `$presence` subscription shared by the tabs as any other is.
   */
  presence(topic: string): Observable<PresenceState> {
    return presenceState((name, params) => this.subscribe(name, params), topic);
  }

  /** Post a request the worker answers with one `result`; `signal` cancels it. */
  #request(
    method: string,
    signal: AbortSignal | undefined,
    message: (id: number) => TabMessage,
  ): Promise<unknown> {
    if (this.#closedError) return Promise.reject(this.#closedError);
    if (signal?.aborted) return Promise.reject(new CancelledError(method, signal.reason));
    return new Promise((resolve, reject) => {
      const id = ++this.#nextId;
      try {
        this.#post(message(id));
      } catch (err) {
        return reject(err as Error); // params JSON cannot carry (a BigInt, a cycle)
      }
      const abort = (): void => {
        if (!this.#calls.delete(id)) return;
        this.#post({ t: 'cancel', id });
        reject(new CancelledError(method, signal!.reason));
      };
      const done = (): void => signal?.removeEventListener('abort', abort);
      this.#calls.set(id, {
        resolve: (value) => {
          done();
          resolve(value);
        },
        reject: (error) => {
          done();
          reject(error as Error);
        },
      });
      signal?.addEventListener('abort', abort, { once: true });
    });
  }

  /** Send a notification; throws as RpcClient's does once closed, or disconnected with 'reject'. */
  notify<P extends Params | undefined>(
    descriptor: NotificationDescriptor<P>,
    ...args: ParamsArgs<P>
  ): void;
  notify(method: string, params?: Params): void;
  notify(target: NotificationDescriptor<Params | undefined> | string, params?: Params): void {
    if (this.#closedError) throw this.#closedError;
    if (this.#whenDisconnected === 'reject' && this.state !== 'open') {
      throw new NotConnectedError('Not connected');
    }
    const method = nameOf(target);
    // Params JSON cannot carry (a BigInt, a cycle), or that are no array or object, throw here,
    // as RpcClient.notify throws, not in the worker where no one would hear of it.
    encodeNotification(method, params);
    this.#post({ t: 'notify', method, params: sentParams(params) });
  }

  /**
   * Subscribe to a topic or stream. Observers in every tab with the same topic and params
   * share one subscription on the server: the first subscribes, the last one's unsubscribe
   * (or its tab closing) ends it.
   */
  subscribe<P, T>(descriptor: SubscriptionDescriptor<P, T>, ...args: ParamsArgs<P>): Observable<T>;
  subscribe<T = unknown>(topic: string, params?: unknown): Observable<T>;
  subscribe(target: SubscriptionDescriptor | string, params?: unknown): Observable<unknown> {
    return messagesOf(this.subscribeWithMeta(nameOf(target), params));
  }

  /** Like `subscribe`, with each message's sequence number and missed count. */
  subscribeWithMeta<T = unknown>(
    topic: string,
    params?: unknown,
  ): Observable<SubscriptionEvent<T>> {
    // Made as the stream is subscribed: params JSON cannot carry error it, as a client's do.
    return this.#stream((id) => ({ t: 'sub', id, topic, params: sentParams(params) }));
  }

  /**
   * Where the shared subscription to `topic` with `params` stands (subscriptionStatus$ of the
   * worker's client): observing it never subscribes.
   */
  subscriptionStatus$(topic: string, params?: unknown): Observable<SubscriptionStatus> {
    return this.#stream((id) => ({ t: 'status', id, topic, params: sentParams(params) }));
  }

  /**
   * Register a handler the server can call (`session.call(...)`). The worker hands each call
   * to the first open tab that registered the method, and to the next one if that tab closes
   * before it answers. Returns a function that removes it.
   */
  method<P extends Params | undefined, R>(
    descriptor: MethodDescriptor<P, R> | string,
    handler: Handler<SharedRpcClient, P, R>,
  ): () => void {
    const remove = this.registry.method(descriptor, handler);
    const method = nameOf(descriptor);
    this.#post({ t: 'register', method });
    return () => {
      const mine = this.registry.get(method) === handler;
      remove();
      if (mine && !this.#closedError) this.#post({ t: 'unregister', method });
    };
  }

  notificationsOf<P extends Params | undefined>(
    descriptor: NotificationDescriptor<P> | string,
  ): Observable<P> {
    return notificationsNamed(this.notifications$, descriptor);
  }

  /**
   * Close this tab's client: its calls reject, its subscriptions complete and are released in
   * the worker. The connection stays open for the other tabs; the last tab's close ends it.
   */
  close(): Promise<void> {
    if (!this.#closedError) {
      this.#post({ t: 'bye' });
      this.#shut(new NotConnectedError('Client closed'));
    }
    return Promise.resolve();
  }

  #attach(port: MessagePort): void {
    this.#port = port;
    this.#ready = false;
    port.onmessage = (event: MessageEvent) => this.#receive(event.data as HostMessage);
    this.#post(this.#hello());
  }

  #hello(): TabMessage {
    return {
      t: 'hello',
      v: SHARED_PROTOCOL_VERSION,
      options: this.#config.forwarded,
      token: this.#config.getToken !== undefined,
    };
  }

  /** A connection of this tab's own: the worker's side, loaded now, over a MessageChannel. */
  #fallBack(): void {
    this.#viaWorker = false;
    const channel = new MessageChannel();
    this.#attach(channel.port1);
    import('./host.js').then(
      ({ createSoleTabHost }) => {
        // Closed while it loaded (a StrictMode effect's cleanup, say): what this tab posted on
        // the way, its hello among it, would otherwise dial a connection no one uses.
        if (this.#closedError) channel.port2.close();
        else createSoleTabHost().connect(channel.port2);
      },
      (err: unknown) => this.#shut(err as Error),
    );
  }

  /**
   * The worker did not start (its script missing or failing), or did not answer by the
   * deadline: give it up unanswered, and fall back (or close, with 'throw'). What the
   * tab posted meanwhile is still held, and goes to the fallback.
   */
  #workerFailed(why: string): void {
    if (this.#ready || this.#closedError || !this.#viaWorker) return;
    clearTimeout(this.#deadline);
    const port = this.#port;
    port.onmessage = null;
    // Read by a worker that starts after all: it lets this tab go, and closes the connection it
    // made for the hello when no other tab has it.
    port.postMessage({ t: 'bye' } satisfies TabMessage);
    port.close();
    const throws = this.#config.fallback === 'throw';
    const text = `shared worker ${this.#config.workerUrl ?? '(the worker option)'} ${why}; ${throws ? 'client closed' : 'this tab connects on its own'}`;
    const logger = this.#config.logger;
    if (logger) logger.warn({ workerUrl: this.#config.workerUrl }, text);
    else console.warn(`wsrpc-gateway: ${text}`);
    if (throws) return this.#shut(new ConnectionClosedError(`The shared worker ${why}`));
    this.#fallBack();
  }

  /**
   * The worker speaks another version of the messages (`version`; undefined from a worker of
   * version 1): nothing the tab holds is posted to it, and the client closes saying which
   * versions met and what fixes it. Not a fallback: a connection per tab would hide a
   * deployment that hands tabs a worker of other code, which only a reload or a `name` per
   * version ends.
   */
  #otherVersion(version: unknown): void {
    clearTimeout(this.#deadline);
    // A worker of version 1 took the hello as any other: this lets the tab go there.
    this.#port.postMessage({ t: 'bye' } satisfies TabMessage);
    const error = otherVersionError(SHARED_PROTOCOL_VERSION, version);
    const logger = this.#config.logger;
    if (logger) logger.error({ workerUrl: this.#config.workerUrl, err: error }, error.message);
    else console.error(`wsrpc-gateway: ${error.message}`);
    const event: DisconnectEvent = { reason: error.message, error, willRetry: false };
    this.#lastDisconnect = event;
    this.#disconnects.next(event);
    this.#shut(error);
  }

  #post(message: TabMessage): void {
    if (this.#closedError && message.t !== 'bye') return;
    if (this.#ready || message.t === 'hello' || message.t === 'bye')
      this.#port.postMessage(message);
    // Cloned as postMessage would: what cannot be cloned (nested deeper than cloning goes)
    // throws here, to the caller, and what the caller changes later is not what is sent.
    else this.#outbox.push(structuredClone(message));
  }

  #stream<T>(message: (id: number) => Stream['message']): Observable<T> {
    return new Observable<T>((subscriber) => {
      if (this.#closedError) return subscriber.complete();
      const id = ++this.#nextId;
      const stream = { message: message(id), subscriber: subscriber as Subscriber<unknown> };
      this.#post(stream.message);
      this.#streams.set(id, stream);
      return () => {
        if (this.#streams.delete(id)) this.#post({ t: 'unsub', id });
      };
    });
  }

  #receive(m: HostMessage): void {
    if (!this.#ready) {
      // The first answer states the worker's version (a worker from before versions states none).
      const version = (m as { v?: unknown } | null)?.v;
      if (version !== SHARED_PROTOCOL_VERSION) return this.#otherVersion(version);
      this.#ready = true;
      clearTimeout(this.#deadline);
      for (const message of this.#outbox.splice(0)) this.#port.postMessage(message);
    }
    if (m.t === 'gone') {
      if (!this.#greeting) this.#reattach();
      return;
    }
    this.#greeting = false;
    switch (m.t) {
      case 'welcome':
        // A worker of a release that does not tell it: this tab's own setting stands.
        if (m.whenDisconnected !== undefined) this.#whenDisconnected = m.whenDisconnected;
        return;
      case 'state':
        return this.#moveTo(m.state, m.error);
      case 'disconnect': {
        const { error, ...rest } = m.event;
        const event: DisconnectEvent = error ? { ...rest, error: fromWire(error) } : rest;
        this.#lastDisconnect = event;
        return this.#disconnects.next(event);
      }
      case 'fail':
        return this.#shut(fromWire(m.error));
      case 'result': {
        const call = this.#calls.get(m.id);
        this.#calls.delete(m.id);
        if (m.error) call?.reject(fromWire(m.error));
        else call?.resolve(m.result);
        return;
      }
      case 'msg':
        return this.#streams.get(m.id)?.subscriber.next(m.event);
      case 'join': {
        const { jid, topic } = m;
        const subscription = this.#stream<SubscriptionEvent<unknown>>((id) => ({
          t: 'jsub',
          id,
          jid,
        }));
        return this.#streams.get(m.id)?.subscriber.next({ topic, subscription });
      }
      case 'gap':
        return this.#streams.get(m.id)?.subscriber.next(m.gap);
      case 'status': {
        const { error, ...status } = m.status;
        const value: SubscriptionStatus = error ? { ...status, error: fromWire(error) } : status;
        return this.#streams.get(m.id)?.subscriber.next(value);
      }
      case 'end': {
        const stream = this.#streams.get(m.id);
        this.#streams.delete(m.id);
        if (m.error) stream?.subscriber.error(fromWire(m.error));
        else stream?.subscriber.complete();
        return;
      }
      case 'note':
        return this.#notifications.next({ method: m.method, params: m.params });
      case 'run':
        return void this.#run(m);
      case 'abort':
        return this.#running.get(m.id)?.();
      case 'refused':
        // The worker holds this tab's maxHandlersPerTab: the server's calls to it go elsewhere.
        return (this.#config.logger ?? silentLogger).error(
          { err: fromWire(m.error), method: m.method },
          'the shared worker did not register this handler',
        );
      case 'unposted':
        // The worker read it but could not pass it on (nested too deep to clone, say).
        return (this.#config.logger ?? silentLogger).error(
          { err: fromWire(m.error), method: m.method },
          'a notification from the server could not be passed to this tab: lost',
        );
      case 'lost':
        // A message of the user's inbox: told as a gap of 1, as one lost beyond retention.
        for (const { message, subscriber } of this.#streams.values())
          if (message.t === 'gaps') subscriber.next({ gap: 1 } satisfies InboxGap);
        return;
      case 'ping':
        return this.#port.postMessage({ t: 'pong' } satisfies TabMessage);
    }
  }

  #moveTo(state: ConnectionState, why?: WireError): void {
    if (state === this.#state.value) return;
    if (state !== 'closed') return this.#state.next(state);
    // The worker's client stopped for good (credentials refused, reconnects exhausted, or no
    // reconnecting): this tab's calls reject with what its own client's would.
    const refused = this.#lastDisconnect?.error;
    this.#post({ t: 'bye' });
    this.#shut(
      refused instanceof AuthenticationError
        ? refused
        : why !== undefined
          ? fromWire(why)
          : new NotConnectedError('Client closed'),
    );
  }

  /**
   * Run a server-to-client call (or notification) the worker handed to this tab. One the worker
   * aborts is over here at once: it is not kept, its handler's (or getToken's) signal aborts, and
   * what it gives later is not posted.
   */
  async #run(m: Extract<HostMessage, { t: 'run' }>): Promise<void> {
    const controller = new AbortController();
    const answer = (reply: Omit<Extract<TabMessage, { t: 'answer' }>, 't' | 'id'>): void => {
      if (m.notification || controller.signal.aborted) return;
      try {
        this.#post({ t: 'answer', id: m.id, ...reply });
      } catch (err) {
        // A result nested deeper than structured cloning goes.
        this.#post({ t: 'answer', id: m.id, error: toWire(err) });
      }
    };
    const getToken = this.#config.getToken;
    const handler =
      m.method === ReservedMethod.Token
        ? getToken &&
          ((_params: unknown, { signal }: { signal: AbortSignal }) => getToken({ signal }))
        : this.registry.get(m.method);
    if (!handler) return answer({ missing: true });
    const hooks: (() => void)[] = [];
    const logger = this.#config.logger ?? silentLogger;
    const ctx: HandlerContext<SharedRpcClient> = {
      session: this,
      signal: controller.signal,
      logger,
      id: m.rid,
      method: m.method,
      traceparent: m.traceparent,
      state: {},
      afterReply: (hook) => hooks.push(hook),
    };
    this.#running.set(m.id, (reason) => {
      this.#running.delete(m.id);
      controller.abort(reason ?? new CancelledError(m.method));
    });
    try {
      answer(resultReply(await handler(m.params, ctx)));
      for (const hook of hooks) hook();
    } catch (error) {
      if (m.notification)
        logger.warn({ err: error, method: m.method }, 'notification handler failed');
      answer({ error: toWire(error) });
    } finally {
      this.#running.delete(m.id);
    }
  }

  /** The worker let this tab go (or the page came back from the cache): start again with it. */
  #reattach(): void {
    if (this.#closedError) return;
    this.#away = false;
    const hello = this.#hello();
    // Nothing left the tab but hello and bye: what it holds goes after this hello once answered.
    if (!this.#ready) return this.#port.postMessage(hello);
    this.#greeting = true;
    const lost = new ConnectionClosedError('The shared connection let this tab go');
    for (const call of this.#calls.values()) call.reject(lost);
    this.#calls.clear();
    for (const abort of this.#running.values()) abort(lost);
    this.#running.clear();
    this.#port.postMessage(hello);
    for (const method of this.registry.names()) this.#post({ t: 'register', method });
    for (const stream of this.#streams.values()) {
      // What came while the worker had let this tab go never reached it: each stream that
      // carries messages hears of a gap of unknown size, and starts again where the worker is.
      const { t } = stream.message;
      if (t === 'sub' || t === 'jsub') stream.subscriber.next({ data: undefined, gap: null });
      else if (t === 'status') stream.subscriber.next({ state: 'gap', missed: null });
      else if (t === 'gaps') stream.subscriber.next({ gap: null });
      this.#post(stream.message);
    }
  }

  /** Closed for good, with `error` for the calls made from now on. */
  #shut(error: Error): void {
    if (this.#closedError) return;
    this.#closedError = error;
    clearTimeout(this.#deadline);
    this.#outbox = [];
    this.#page?.removeEventListener('pagehide', this.#onPageHide);
    this.#page?.removeEventListener('pageshow', this.#onPageShow);
    for (const call of this.#calls.values()) call.reject(error);
    this.#calls.clear();
    for (const abort of this.#running.values()) abort(error);
    this.#running.clear();
    const streams = [...this.#streams.values()];
    this.#streams.clear();
    for (const stream of streams) stream.subscriber.complete();
    this.#state.next('closed');
    this.#state.complete();
    this.#disconnects.complete();
    this.#notifications.complete();
    this.#port.onmessage = null;
    this.#port.close();
  }
}

/** `value` as the JSON a client of its own sends of it (sentParams), read back. */
function asSent<T>(value: T): T {
  return readSent<T>(sentParams(value)) as T;
}

/** A handler's result as a client of its own answers it: its JSON, or -32603 if it has none. */
function resultReply(result: unknown): { result?: unknown; error?: WireError } {
  try {
    return { result: asSent(result) };
  } catch {
    // encodeSuccess's answer to a result JSON.stringify throws on.
    const error = new InternalError('Internal error', 'result is not serializable as JSON');
    return { error: toWire(error) };
  }
}

/** `call`'s options: a timeout and a signal, as RpcClient's. */
export type SharedCallOptions = Pick<CallOptions, 'timeoutMs' | 'timeout' | 'signal'>;

/**
 * A client whose connection is shared by every tab of the origin: a SharedWorker holds one
 * WebSocket (and so one session on the gateway) and every tab's calls, subscriptions and
 * handlers go through it. Where SharedWorker is missing, one connection per tab (`fallback`).
 */
export function createSharedClient(options: SharedClientOptions): SharedRpcClient {
  return new SharedRpcClient(options);
}

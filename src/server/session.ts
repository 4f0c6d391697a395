import type { Observable } from 'rxjs';
import type { Logger } from '../peer/logger.js';
import type {
  MethodDescriptor,
  NotificationDescriptor,
  ParamsArgs,
} from '../peer/method-descriptor.js';
import type { CallOptions } from '../peer/pending-calls.js';
import type { BatchEntry, CloseInfo, IncomingNotification, Peer } from '../peer/peer.js';
import type { Params } from '../protocol/types.js';
import type { Sink } from '../pubsub/sink.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { JsonRpcError } from '../protocol/errors.js';
import { assertEncodable } from '../encoding/encoded-depth.js';
import { closedError } from '../peer/peer-options.js';
import { SLOW_CONSUMER_CLOSE_CODE } from '../pubsub/delivery.js';
import type { BudgetLedger } from '../transport/output-budget.js';
import type { EncodedFrame, ServerTransport } from '../transport/transport.js';
import { OutputHold } from './held-output.js';
import type { JoinOptions, SessionMembership, SharedMembership } from './membership.js';
import type { SessionInbox } from './session-router.js';
import { drainSession } from './shutdown.js';
import { RateLimit, TokenBucket, smallMs } from './token-bucket.js';
import type { DrainOptions } from './shutdown.js';

/** The error for what needs a connection the server can push on, asked of an HTTP exchange. */
export function pushUnsupported(what: string): JsonRpcError {
  return new JsonRpcError(
    ErrorCode.UnsupportedTransport,
    `${what} need a connection the server can send on: use the WebSocket (ws:// or wss://), TCP or stdio, not HTTP POST`,
  );
}

/**
 * Throws a TypeError for notification params that are not an object or an array (JSON-RPC's
 * params are structured, or absent), and publish's RangeError (assertEncodable) for params
 * nested deeper than MAX_ENCODED_DEPTH, its TypeError for a string holding a lone surrogate: refused where they enter, as published data is, since
 * past the bound a MessagePack or CBOR connection could not be sent them and would be closed 1011.
 */
export function assertEncodableParams(params: Params | undefined): void {
  if (params === undefined) return;
  if (typeof params !== 'object' || params === null) {
    throw new TypeError(
      `params must be an object or an array, not ${params === null ? 'null' : typeof params}`,
    );
  }
  assertEncodable(JSON.stringify(params) ?? 'null', 'params');
}

/** Session.expiry of a connection that has not authenticated yet. */
const PENDING = null;

/** The characters a held notification or server call counts: its method and params as JSON. */
const heldChars = (method: string, params: Params | undefined): number =>
  method.length + (JSON.stringify(params)?.length ?? 0);

/** The time sessions count their opening from (see Session.openedAt). */
const CLOCK_ORIGIN = Date.now();

/**
 * One connection as the server sees it: who it is (`context`, from
 * the authenticate hook), and a way to call, notify and close it.
 */
export class Session<C = unknown> implements Sink {
  /** Set by the gateway right after construction. */
  peer!: Peer<Session<C>>;
  /**
   * When it opened, in ms since CLOCK_ORIGIN: for the first 24 days of the process a small
   * integer held in the object itself, where an epoch time takes a heap number of its own.
   */
  private readonly openedAt = smallMs(Date.now() - CLOCK_ORIGIN);
  /** The user this session belongs to (GatewayOptions.userOf), if any. */
  user: string | undefined;
  /** How it takes its user's messages, when the gateway keeps user inboxes (GatewayOptions.userInbox). */
  inbox: SessionInbox | undefined;
  /**
   * The gateway's membership (join, leave), set once the session is open: the one object every
   * session holds, where a bound one per session would cost an object each.
   */
  private members: SharedMembership<C> | undefined;
  private currentContext: C;
  /**
   * When the identity expires (undefined: never), or PENDING for a connection accepted without
   * credentials (`identity.inBand`) that has not authenticated yet: it is sent nothing
   * (notifications are dropped, calls refused) until it does. One field for both: every
   * session carries it.
   */
  private expiry: number | undefined | typeof PENDING = undefined;
  /**
   * The rate limit of the messages it receives (limits.ratePerSecond): the limit every session
   * shares until the first message that takes a token, then the session's own bucket (full when
   * made, as a bucket made at the opening would be by then). A connection that never sends
   * holds no bucket.
   */
  private rate: RateLimit | TokenBucket | undefined = undefined;
  /**
   * What becomes of what the session sends the client: undefined, it goes out; an OutputHold,
   * it waits for a renewal of the expired identity (holdOutput); an Error, it never goes (the
   * renewal was refused, the connection is closing), and a server call is refused with it.
   */
  private output: OutputHold | Error | undefined = undefined;

  constructor(
    readonly id: string,
    context: C,
    readonly remoteAddress: string | undefined,
    readonly logger: Logger,
    /** The connection's adapter (WebSocket, TCP, stdio or an HTTP exchange); fan-out writes through it directly (Sink). */
    readonly transport: ServerTransport,
  ) {
    this.currentContext = context;
  }

  /**
   * Its server-side membership (join, leave), once the gateway has opened the session.
   * @internal
   */
  get membership(): SessionMembership | undefined {
    return this.members?.of(this);
  }

  /**
   * Set by the gateway once the session is open: what `join` and `leave` go through.
   * @internal
   */
  useMembership(members: SharedMembership<C>): void {
    this.members = members;
  }

  /**
   * Limit the messages this session receives to `limit`; the session is then its peer's `admit`.
   * @internal
   */
  limitRate(limit: RateLimit): void {
    this.rate = limit;
  }

  /**
   * One message received: whether the rate limit lets it through (PeerOptions.admit).
   * @internal
   */
  take(): boolean {
    let rate = this.rate;
    if (rate === undefined) return true;
    if (rate instanceof RateLimit) this.rate = rate = new TokenBucket(rate);
    return rate.take();
  }

  /** When the session opened (ms since the epoch). */
  get connectedAt(): number {
    return CLOCK_ORIGIN + this.openedAt;
  }

  /**
   * Who the session is: what the authenticate hook returned, replaced when the client
   * refreshes its credentials (see docs/identity.md); undefined while an in-band connection
   * has not authenticated.
   */
  get context(): C {
    return this.currentContext;
  }

  /** When the session's identity expires (ms since the epoch, `identity.expiresAtOf`); undefined: never. */
  get expiresAt(): number | undefined {
    const expiry = this.expiry;
    return expiry === PENDING ? undefined : expiry;
  }

  /** Whether the session has an identity: false only while an in-band connection has not authenticated. */
  get isAuthenticated(): boolean {
    return this.expiry !== PENDING;
  }

  private get unauthenticated(): boolean {
    return this.expiry === PENDING;
  }

  /**
   * Set by the gateway (in-band authentication, refresh): the context and its expiry, or
   * `pending` for a connection accepted without credentials.
   * @internal
   */
  setIdentity(identity: { context: C; expiresAt: number | undefined } | 'pending'): void {
    if (identity === 'pending') {
      this.expiry = PENDING;
      return;
    }
    this.currentContext = identity.context;
    this.expiry = identity.expiresAt;
  }

  /** Sink: write a pre-built frame (fan-out), unless the session has closed. */
  send(frame: string | EncodedFrame, from?: object): void {
    if (this.peer.isClosed) return;
    const output = this.output;
    if (output === undefined) {
      this.transport.send(frame);
      return;
    }
    if (output instanceof Error) return;
    output.keep({
      chars: typeof frame === 'string' ? frame.length : frame.bytes.length,
      owner: from,
      send: () => {
        if (!this.peer.isClosed) this.transport.send(frame);
      },
      drop: () => undefined,
    });
  }

  /**
   * Sink: bytes written to this session's socket but not yet sent, and what is held back for it
   * (holdOutput): a subscription's slow-consumer policy weighs the two together.
   */
  get bufferedAmount(): number {
    const output = this.output;
    const buffered = this.transport.bufferedAmount;
    return output instanceof OutputHold ? buffered + output.chars : buffered;
  }

  /**
   * What `holdOutput` holds now, as a member of the node's output budget; undefined when nothing
   * is held.
   * @internal
   */
  get heldOutput(): OutputHold | undefined {
    const output = this.output;
    return output instanceof OutputHold ? output : undefined;
  }

  /**
   * Sink: call `listener` once the socket's write buffer has emptied; while output is held, once
   * it has been released and written.
   */
  onDrain(listener: () => void): () => void {
    const output = this.output;
    if (!(output instanceof OutputHold)) return this.transport.onDrain(listener);
    return output.onRelease(() => this.transport.onDrain(listener));
  }

  /**
   * Hold back what the session would send the client (its subscriptions' frames, `notify`,
   * `call`; not the replies to its calls) until `releaseOutput`, in order. Past `maxChars` held,
   * the connection is closed as a slow consumer (1013) and none of it is sent. What is held
   * counts toward `budget` (the node's output budget) while it is held. Nothing, when output is
   * held or dropped already.
   * @internal
   */
  holdOutput(maxChars: number, budget?: BudgetLedger): void {
    if (this.output !== undefined || this.peer.isClosed) return;
    const hold = new OutputHold(
      maxChars,
      () => {
        const info = { code: SLOW_CONSUMER_CLOSE_CODE, reason: 'slow consumer' };
        this.dropOutput(closedError(info));
        this.close(info.code, info.reason);
      },
      budget,
    );
    this.output = hold;
    // The connection closed while held: none of it goes, and its calls fail as the close's.
    void this.peer.closed.then((info) => {
      if (this.output === hold) this.dropOutput(closedError(info));
    });
  }

  /**
   * Send what `holdOutput` held, in order, and what comes after it directly again.
   * @internal
   */
  releaseOutput(): void {
    const output = this.output;
    if (!(output instanceof OutputHold)) return;
    this.output = undefined;
    output.release();
  }

  /**
   * Give up the frames `holdOutput` holds from `owner` (a subscription's delivery, Sink.send's
   * `from`): its subscription ended before the release, under an identity that does not allow
   * what it held.
   * @internal
   */
  discardHeld(owner: object): void {
    this.heldOutput?.discard(owner);
  }

  /**
   * Send nothing more to the client until the close: what is held is given up (its calls
   * rejected with `error`), and what comes after it too (a server call rejected with `error`).
   * @internal
   */
  dropOutput(error: Error): void {
    const output = this.output;
    this.output = error;
    if (output instanceof OutputHold) output.giveUp(error);
  }

  /** Call a method the client registered, and await its answer. */
  call<P extends Params | undefined, R>(
    descriptor: MethodDescriptor<P, R>,
    ...args: ParamsArgs<P, [options?: CallOptions]>
  ): Promise<R>;
  call(method: string, params?: Params, options?: CallOptions): Promise<unknown>;
  call(
    target: MethodDescriptor<Params | undefined, unknown> | string,
    params?: Params,
    options?: CallOptions,
  ) {
    if (!this.transport.canPush) return Promise.reject(pushUnsupported('Server-to-client calls'));
    if (this.unauthenticated) {
      return Promise.reject(
        new JsonRpcError(ErrorCode.Unauthenticated, 'The connection has not authenticated yet'),
      );
    }
    const method = typeof target === 'string' ? target : target.name;
    const output = this.output;
    if (output === undefined || this.peer.isClosed) return this.peer.call(method, params, options);
    if (output instanceof Error) return Promise.reject(output);
    return new Promise((resolve, reject) => {
      output.keep({
        chars: heldChars(method, params),
        send: () => {
          this.peer.call(method, params, options).then(resolve, reject);
        },
        drop: reject,
      });
    });
  }

  /**
   * Send the client a notification. Throws a RangeError, sending nothing, when `params` nest
   * deeper than MAX_ENCODED_DEPTH (512 levels), and a TypeError when a string of them holds a lone
   * surrogate, as `gateway.publish` rejects such data.
   */
  notify<P extends Params | undefined>(
    descriptor: NotificationDescriptor<P>,
    ...args: ParamsArgs<P>
  ): void;
  notify(method: string, params?: Params): void;
  notify(target: NotificationDescriptor<Params | undefined> | string, params?: Params): void {
    // Whatever the connection: whether a value is refused does not depend on who it is for.
    assertEncodableParams(params);
    this.notifyChecked(typeof target === 'string' ? target : target.name, params);
  }

  /**
   * notify() with params already held to MAX_ENCODED_DEPTH (assertEncodableParams): the
   * gateway checks a message for a user's or a session's once, not once per session.
   * @internal
   */
  notifyChecked(method: string, params: Params | undefined): boolean {
    // An HTTP exchange has nowhere to put a message the client did not ask for, a connection
    // not yet authenticated is sent nothing, and a socket in its close handshake takes nothing
    // more: false, not sent. Once closed, notify throws (ConnectionClosedError).
    if (!this.transport.canPush || this.unauthenticated) return false;
    if (this.peer.isClosing && !this.peer.isClosed) return false;
    const output = this.output;
    if (output !== undefined && !this.peer.isClosed) {
      if (output instanceof Error) return false;
      // Taken for sending, as a notification written to a socket is: it goes at the release.
      output.keep({
        chars: heldChars(method, params),
        send: () => void this.notifyChecked(method, params),
        drop: () => undefined,
      });
      return true;
    }
    this.peer.notify(method, params);
    return true;
  }

  batch(
    entries: readonly BatchEntry[],
    options?: CallOptions,
  ): Promise<PromiseSettledResult<unknown>[]> {
    return this.peer.batch(entries, options);
  }

  /** Notifications this client sent. */
  get notifications$(): Observable<IncomingNotification> {
    return this.peer.notifications$;
  }

  get isClosed(): boolean {
    return this.peer.isClosed;
  }

  get closed(): Promise<CloseInfo> {
    return this.peer.closed;
  }

  close(code = 1000, reason = ''): void {
    this.peer.close(code, reason);
  }

  /**
   * Subscribe this session to `topic` from the server, as if it had subscribed itself: the same
   * authorization (topicsOf, the topic's `authorize`), limits and frames, announced to the
   * client by `rpc.joined` (see docs/pubsub.md, Server-side membership). `since` replays the
   * topic's messages after that seq first. Resolves with the subscription id (the one it has,
   * when it is subscribed to the topic already); rejects like a subscribe (-32602 unknown topic,
   * -32004, -32005, -32003, -32009), and with -32008 on an HTTP exchange.
   */
  join(topic: string, options?: JoinOptions): Promise<string> {
    if (!this.transport.canPush) return Promise.reject(pushUnsupported('Server-side joins'));
    if (!this.members) {
      return Promise.reject(
        new JsonRpcError(ErrorCode.Unauthenticated, 'The connection has not authenticated yet'),
      );
    }
    return this.members.join(this, topic, options);
  }

  /**
   * End this session's subscriptions to `topic` (joined or its own), each with the stream-end
   * frame `complete`. False when it had none.
   */
  leave(topic: string): boolean {
    return this.members?.leave(this, topic) ?? false;
  }

  /**
   * Move this client to another node without loss (to rebalance after a node came back):
   * what `gateway.drain()` does to every session, for this one alone. The rpc.reconnect
   * notice (with `reconnectUrl` if given), calls after it refused with -32006, then close 1012
   * once its calls are done or at the deadline (default 10 s). Resolves once it is closed.
   */
  drain(options: DrainOptions = {}): Promise<void> {
    return drainSession(this, options);
  }
}

import type { ClassifyOptions, IdTextFinder } from '../protocol/classify.js';
import { ConnectionClosedError } from '../protocol/local-errors.js';
import type { Params } from '../protocol/types.js';
import type { Logger } from './logger.js';
import { MethodRegistry } from './method-registry.js';
import type { Handler, HandlerTable } from './method-registry.js';
import { composeMiddleware } from './middleware.js';
import type { Middleware, MiddlewareChain, SubscribeMethod } from './middleware.js';
import { renamed } from './option-rules.js';
import type { Peer } from './peer.js';

/*
 * The options a Peer is made from, the shared config resolved from them once per server,
 * and the small types they mention. Apart from Peer itself, so that the layers above (gateway,
 * session table, metrics) can read the settings without the peer's machinery.
 */

export interface PeerOptions<S> {
  /** Handlers for incoming calls; may be shared by many peers. */
  registry?: HandlerTable<S>;
  /** Passed to handlers as `ctx.session`. */
  session: S;
  logger?: Logger;
  /** Default timeout for outgoing calls in ms; 0 waits forever. Default 30 000. */
  callTimeoutMs?: number;
  /** @deprecated Use `callTimeoutMs`. */
  callTimeout?: number;
  /** Most outgoing calls awaiting a response at once. Default 1 024. */
  maxPendingCalls?: number;
  /** Most incoming calls running at once; beyond it calls get -32000 Server busy. Default 256. */
  maxInFlight?: number;
  /** Put internal error messages and stacks in `error.data` (debug only). Default false. */
  exposeErrorDetails?: boolean;
  /** Parsing limits and the JSON-RPC 1.0 switch. */
  parse?: ClassifyOptions;
  /**
   * Gather the calls and notifications made in one turn into one JSON-RPC batch
   * frame of at most this many members (for browsers, where a WebSocket cannot
   * be corked). 0 or undefined sends each on its own. Keep it at or below the
   * server's maxBatch.
   */
  batchOutgoing?: number;
  /**
   * Decide whether an incoming call or notification may run; false answers -32004
   * Unauthorized (a notification is dropped). Runs after the method is found.
   */
  authorize?: (
    method: string,
    params: Params | undefined,
    session: S,
  ) => boolean | Promise<boolean>;
  /**
   * A per-session refusal before anything else (the server's identity: a connection not yet
   * authenticated, or whose credentials expired): the error for a request, or undefined to go
   * on; a refused notification is dropped. Not asked for `rpc.ping`, `rpc.cancel` and
   * `rpc.authenticate`.
   */
  gate?: (method: string, session: S) => { code: number; data?: unknown } | undefined;
  /**
   * Rate limit: `take()` is called for each incoming message (each batch member); for a request
   * false answers -32003 Rate limited, and a notification is dropped. Responses and invalid
   * messages (parse errors included) take a token too, so garbage spends the same budget as
   * calls, but are handled as usual whatever the answer: an invalid message still gets its
   * -32700/-32600 error (the spec's answer, no larger than a -32003), and a response the peer
   * is waiting for is still delivered.
   */
  admit?: { take(): boolean };
  /** Told once the connection has closed and everything has settled (an alternative to `closed` that allocates nothing). */
  onClosed?: (peer: Peer<S>, info: CloseInfo) => void;
  /** Told of every incoming call once it is answered, for metrics. */
  onCallSettled?: (method: string, outcome: CallOutcome, durationMs: number) => void;
  /** Handlers for reserved `rpc.` methods the layer above provides (e.g. rpc.authenticate). */
  reservedMethods?: ReadonlyMap<string, Handler<S>>;
  /**
   * Reserved `rpc.` methods the layer above answers with one result whatever the call, given
   * as its JSON text (JSON.stringify's) and written as it is: rpc.discover's document,
   * serialised once rather than on every call. Looked up at each call, so a changed entry
   * answers the next one. Within maxInFlight and the server's checks as reservedMethods are;
   * a server's peer only (IncomingDispatch).
   * @internal
   */
  reservedResults?: ReadonlyMap<string, string>;
  /** Reserved (`rpc.`) notifications other than cancel, for the layer above. */
  onReservedNotification?: (method: string, params: Params | undefined) => void;
  /**
   * Around the handler of every incoming call and notification that reaches one (after the
   * rate limit, the method lookup, the in-flight limit and `authorize`; not around reserved
   * `rpc.` methods), first to last. See Middleware.
   */
  middleware?: readonly Middleware<S>[];
  /** The method whose calls middleware see as kind 'subscribe', and how to read its topic. */
  subscribeMethod?: SubscribeMethod;
}

/** The options every peer made from them shares, with their defaults filled in. */
export interface PeerConfig<S> {
  readonly registry: HandlerTable<S>;
  readonly callTimeoutMs: number;
  readonly maxPendingCalls: number;
  readonly maxInFlight: number;
  readonly exposeErrorDetails: boolean;
  readonly parse: ClassifyOptions;
  readonly batchOutgoing: number;
  readonly authorize?: PeerOptions<S>['authorize'];
  readonly gate?: PeerOptions<S>['gate'];
  readonly onClosed?: PeerOptions<S>['onClosed'];
  readonly onCallSettled?: PeerOptions<S>['onCallSettled'];
  readonly reservedMethods?: PeerOptions<S>['reservedMethods'];
  readonly reservedResults?: PeerOptions<S>['reservedResults'];
  readonly onReservedNotification?: PeerOptions<S>['onReservedNotification'];
  /** The middleware composed once; undefined when there is none. */
  readonly middleware?: MiddlewareChain<S> | undefined;
  /**
   * How a PeerCore finds the numeric ids it must echo as sent (see id-text.ts); none: as
   * parsed. A Peer always uses idTextsOf.
   */
  readonly idTexts?: IdTextFinder;
}

/** Resolve the shared part of `options` (everything but session, logger and admit). */
export function peerConfig<S>(options: Omit<PeerOptions<S>, 'session'>): PeerConfig<S> {
  return {
    registry: options.registry ?? new MethodRegistry<S>(),
    callTimeoutMs:
      (renamed(options, 'callTimeoutMs', 'callTimeout') as number | undefined) ?? 30_000,
    maxPendingCalls: options.maxPendingCalls ?? 1024,
    maxInFlight: options.maxInFlight ?? 256,
    exposeErrorDetails: options.exposeErrorDetails ?? false,
    parse: options.parse ?? {},
    batchOutgoing: options.batchOutgoing ?? 0,
    authorize: options.authorize,
    gate: options.gate,
    onClosed: options.onClosed,
    onCallSettled: options.onCallSettled,
    reservedMethods: options.reservedMethods,
    reservedResults: options.reservedResults,
    onReservedNotification: options.onReservedNotification,
    middleware: composeMiddleware(options.middleware, options.subscribeMethod),
  };
}

/** How an incoming call ended, as metrics see it. */
export type CallOutcome = 'ok' | 'error' | 'not_found' | 'rejected';

export interface CloseInfo {
  code: number;
  reason: string;
}

/** The error calls and handlers get once the connection has closed: its code and reason said. */
export function closedError(info: CloseInfo | undefined): ConnectionClosedError {
  const why = info ? ` (${info.code}${info.reason ? ` ${info.reason}` : ''})` : '';
  return new ConnectionClosedError(`Connection closed${why}`, info?.code, info?.reason);
}

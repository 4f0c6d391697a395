// The options createClient takes, and the one step that checks them and fills in their
// defaults (`resolveClientOptions`). Apart from the client so that its connection lifecycle
// (client-connection.ts) and its call API (client.ts) can both read them without importing
// each other. Kept compact: the browser bundle carries it.
import { silentLogger } from '../peer/logger.js';
import type { Logger } from '../peer/logger.js';
import { middlewareRule } from '../peer/middleware.js';
import type { Middleware } from '../peer/middleware.js';
import {
  checkOptions,
  isRecord,
  numberIn,
  ofType,
  oneOf,
  refuse,
  renamed,
} from '../peer/option-rules.js';
import type { Rule } from '../peer/option-rules.js';
import { DEFAULT_SUBSCRIPTION_METHODS } from '../protocol/subscription-frames.js';
import { DEFAULT_CLIENT_MAX_BUFFERED_BYTES } from '../transport/websocket-transport.js';
import type { WebSocketConstructor } from '../transport/websocket-transport.js';
import type { WireCodec } from '../encoding/codec.js';
import { defaultBackoff } from './backoff.js';
import { redactUrl } from './redact-url.js';
import type { BackoffOptions } from './backoff.js';
import type { RpcClient } from './client.js';
import type { ClientSubscriptionMethods } from './subscriptions.js';

/** A value, or a function (sync or async) called for it before each dial. */
export type PerDial<T> = T | (() => T | Promise<T>);

/** What `getToken` is given each time it is asked for a token. */
export interface TokenRequest {
  /**
   * Aborted once the token is no longer wanted: the client closed, the connect attempt it serves
   * passed `connectTimeoutMs`, or every server request (`rpc.token`) waiting on it was given
   * up. Nothing waits on the token from then on, and a token given later is dropped.
   */
  readonly signal: AbortSignal;
}

/** The token provider: a function that may ignore its argument. */
export type GetToken = (request: TokenRequest) => string | Promise<string>;

/** Reconnecting: the backoff, and what a refusal of the credentials does. */
export interface ReconnectOptions extends BackoffOptions {
  /**
   * After an upgrade refused with 401/403, an in-band refusal (-32010) or a close with
   * 4401/4403/4419: `'stop'` closes the client (calls reject with AuthenticationError),
   * `'retry'` dials again with the backoff. A 4419 (expired), or a token refused as expired
   * when connecting, is retried once with a fresh token from `getToken` even when stopping,
   * since the provider can mint one. Default 'stop'.
   */
  onAuthFailure: 'stop' | 'retry';
  /**
   * Reconnect attempts in a row that may fail before the client stops: closes, as a refusal of
   * the credentials stops it, with calls rejecting with ReconnectFailedError. A dial that fails
   * and a connection lost before it stayed open `resetAfterMs` are failed attempts; a connection
   * that stayed open that long starts the count again. 0: no reconnect after a failure. An
   * integer, or Infinity (default: never stop).
   */
  maxAttempts: number;
}

export interface ClientOptions {
  /**
   * Gateway URL, or several: on failure the client moves on to the next one. A function
   * (sync or async) is called for the URL before each dial.
   */
  url: string | readonly string[] | (() => string | Promise<string>);
  /**
   * WebSocket class. Default `globalThis.WebSocket`; in Node 20 pass `WebSocket` from `ws`. For
   * the HTTP streaming fallback, `fallbackSocket({ transports: ['websocket', 'sse'] })`: kept out
   * of this option's default so a client without it does not carry its code.
   */
  WebSocket?: WebSocketConstructor;
  /** Subprotocols to offer, or a function (sync or async) called before each dial. */
  protocols?: PerDial<string | string[]>;
  /**
   * The encoding to ask for: 'json' (default), or a binary codec imported from its own entry
   * (`msgpack` from 'wsrpc-gateway/msgpack', `cbor` from 'wsrpc-gateway/cbor'). Its
   * subprotocol is offered first, then "jsonrpc-2.0": a gateway without it answers in JSON.
   */
  encoding?: 'json' | WireCodec;
  /**
   * Headers of the upgrade request, or a function (sync or async) called before each dial.
   * Node with the `ws` WebSocket only: a browser's WebSocket cannot send headers.
   */
  headers?: PerDial<Record<string, string>>;
  /**
   * The token provider, called before each dial, by `authenticate()` without a token, and when
   * the server asks for a fresh token (`rpc.token`). Its token goes as `tokenTransport` says.
   * `signal` aborts when the token is no longer wanted (see TokenRequest). Anything but a
   * non-empty string is a TypeError: a provider failure, retried with the backoff.
   */
  getToken?: GetToken;
  /**
   * `'in-band'`: `rpc.authenticate { token }` is the first message of every connection, before
   * queued calls and resubscribes (works in browsers). `'header'`: `Authorization: Bearer`
   * on the upgrade (Node with `ws` only). Default 'in-band'.
   */
  tokenTransport?: 'in-band' | 'header';
  /**
   * Reconnect with capped exponential backoff; `false` to stay closed after a drop. The
   * backoff starts again from `initialDelayMs` only once a connection has stayed open for
   * `resetAfterMs` (default 5 s). The same backoff paces resubscribing after a transient
   * subscribe error (-32009 Broker unavailable, a timeout). `onAuthFailure` says whether a
   * refusal of the credentials stops the client, `maxAttempts` after how many failed reconnects
   * in a row it stops.
   */
  reconnect?: Partial<ReconnectOptions> | false;
  /** Give up on a connection attempt after this many ms. Default 10 000. */
  connectTimeoutMs?: number;
  /** Default timeout of calls in ms; 0 waits forever. Default 30 000. */
  callTimeoutMs?: number;
  /** @deprecated Use `callTimeoutMs`. */
  callTimeout?: number;
  /** Calls made while not connected: queue them until the next connection (default) or reject at once. */
  whenDisconnected?: 'queue' | 'reject';
  /** Most calls and notifications queued while disconnected. Default 100. */
  maxQueued?: number;
  /** Most calls awaiting a response at once. Default 1 024. */
  maxPendingCalls?: number;
  /**
   * Most subscriptions made by the server (`rpc.joined`) held at once: a join beyond it is
   * unsubscribed at once and logged at warn (once a minute). Default 1 000.
   */
  maxJoined?: number;
  /**
   * Bytes the client may leave queued for a server that does not read them: past it, after an
   * incoming message, the client stops reading (the `ws` WebSocket in Node, `tcpSocket`,
   * `streamSocket`) until the server has read them down to half; a browser's WebSocket, which
   * cannot stop reading, is closed with 1008 past 16 times it. Raise it for large uploads.
   * Default 4 MiB; 0: no bound.
   */
  maxBufferedBytes?: number;
  /**
   * Largest message taken from the server, in bytes: a larger one closes the connection with
   * 1009 (calls in flight reject with ConnectionClosedError, and the client reconnects). Given
   * to the `ws` WebSocket in Node as its `maxPayload`, which refuses the message as it arrives,
   * holding no more than that; a browser's WebSocket has no such setting and reads any size.
   * `tcpSocket` and `streamSocket` take `maxLineBytes` instead. Keep it above the largest
   * message the server sends: a subscription resumed over a larger one meets it again on every
   * reconnect. Default 100 MiB (`ws`'s own); 0: no bound.
   */
  maxMessageBytes?: number;
  /**
   * Gather the calls and notifications made in one turn into one JSON-RPC batch
   * of up to this many (fewer frames; meant for browsers, where a WebSocket
   * cannot be corked). Default 0: off. Keep it at or below the server's maxBatch.
   */
  batchCalls?: number;
  /**
   * Liveness probe: every `intervalMs` the client sends `rpc.ping`; no answer within
   * `timeoutMs` means the server is gone silent, and the client reconnects (a browser
   * cannot send WebSocket pings). `false` disables. Default { intervalMs: 20 000, timeoutMs: 10 000 }.
   */
  heartbeat?: { intervalMs?: number; timeoutMs?: number } | false;
  /**
   * In a browser (a page or a worker): when the network comes back (the `online` event) or the
   * page becomes visible again, a reconnect waiting out its backoff dials at once, and an open
   * connection is probed with `rpc.ping` (so is one when the network goes, `offline`): one that
   * died meanwhile is left within the heartbeat's `timeoutMs`. Where there are no such events
   * (Node), nothing is listened to. Default true.
   */
  networkEvents?: boolean;
  /**
   * Keep the user's inbox (the gateway's `userInbox`): the client subscribes `$inbox` for its
   * whole life, as its first call on every connection, and each message sent to its user
   * (`gateway.notifyUser`) reaches `notifications$`, `notificationsOf` and the handler
   * registered for it exactly once, in order, across reconnects to any node; messages lost
   * past the server's retention are told on `inboxGaps$`. A server without an inbox refuses
   * the subscribe: one warning in the log, and the client carries on without. Default false.
   */
  inbox?: boolean;
  /** Must match the gateway's `subscriptionMethods`. Default subscribe / subscription / unsubscribe. */
  subscriptionMethods?: Partial<ClientSubscriptionMethods>;
  logger?: Logger;
  /**
   * Functions around the handlers of the calls and notifications the server sends the client,
   * first to last (`ctx.session` is the client; see docs/middleware.md).
   */
  middleware?: readonly Middleware<RpcClient>[];
}

/** The longest delay a timer takes (2^31 - 1 ms, about 24.8 days). */
const MAX_DELAY_MS = 2 ** 31 - 1;

/** Every default of `createClient`'s options, in one place. */
export const clientDefaults = Object.freeze({
  reconnect: Object.freeze({
    ...defaultBackoff,
    onAuthFailure: 'stop' as 'stop' | 'retry',
    maxAttempts: Infinity,
  }),
  tokenTransport: 'in-band' as 'in-band' | 'header',
  connectTimeoutMs: 10_000,
  callTimeoutMs: 30_000,
  whenDisconnected: 'queue' as 'queue' | 'reject',
  maxQueued: 100,
  maxPendingCalls: 1024,
  maxJoined: 1000,
  maxBufferedBytes: DEFAULT_CLIENT_MAX_BUFFERED_BYTES,
  maxMessageBytes: 100 * 1024 * 1024,
  batchCalls: 0,
  heartbeat: Object.freeze({ intervalMs: 20_000, timeoutMs: 10_000 }),
  networkEvents: true,
  inbox: false,
  subscriptionMethods: DEFAULT_SUBSCRIPTION_METHODS,
});

/** `createClient`'s options, checked, with their defaults filled in; frozen. */
export interface ClientConfig {
  /** The gateway URLs, tried in turn; empty when `urlOf` gives them. */
  readonly urls: readonly string[];
  /** The function `url` was given as, called before each dial; undefined for fixed URLs. */
  readonly urlOf: (() => string | Promise<string>) | undefined;
  /** The WebSocket class given, or the global one. */
  readonly WebSocket: WebSocketConstructor;
  readonly protocols: PerDial<string | string[]> | undefined;
  /** The binary codec asked for; undefined: JSON. */
  readonly encoding: WireCodec | undefined;
  readonly headers: PerDial<Record<string, string>> | undefined;
  readonly getToken: GetToken | undefined;
  readonly tokenTransport: 'in-band' | 'header';
  readonly reconnect: Readonly<ReconnectOptions> | false;
  readonly connectTimeoutMs: number;
  readonly callTimeoutMs: number;
  readonly whenDisconnected: 'queue' | 'reject';
  readonly maxQueued: number;
  readonly maxPendingCalls: number;
  readonly maxJoined: number;
  /** Bytes queued for the server past which reading pauses; 0: no bound. */
  readonly maxBufferedBytes: number;
  /** Largest message taken from the server (`ws`'s maxPayload); 0: no bound. */
  readonly maxMessageBytes: number;
  readonly batchCalls: number;
  readonly heartbeat: Readonly<{ intervalMs: number; timeoutMs: number }> | false;
  readonly networkEvents: boolean;
  readonly inbox: boolean;
  readonly subscriptionMethods: Readonly<ClientSubscriptionMethods>;
  readonly logger: Logger;
  /** Around the handlers, first to last; undefined for none. */
  readonly middleware: readonly Middleware<RpcClient>[] | undefined;
}

const count = (min: number): Rule => numberIn(min, Infinity, true);
const ms = (min: number, max = MAX_DELAY_MS): Rule => numberIn(min, max);
const callMs = numberIn(0, Infinity, false, ' (0: no timeout)');
const orFalse =
  (what: string): Rule =>
  (value, name) => {
    if (value !== false && !isRecord(value)) refuse(name, `${what} or false`, value);
  };
const name = ofType('string');
const fn = ofType('function');
/** A value the rule `rule` takes, or a function to be called for one before each dial. */
const perDial =
  (rule: Rule): Rule =>
  (value, key) => {
    if (typeof value !== 'function') rule(value, key);
  };
const protocolList: Rule = (value, key) => {
  if (
    typeof value !== 'string' &&
    !(Array.isArray(value) && value.every((p) => typeof p === 'string'))
  )
    refuse(key, 'a string, an array of strings or a function', value);
};
const headerRecord: Rule = (value, key) => {
  if (!isRecord(value) || Object.values(value).some((v) => typeof v !== 'string'))
    refuse(key, 'an object of header strings or a function', value);
};

/** What each option may be; null: checked below, with its parts. */
export const clientOptionRules: Readonly<Record<keyof ClientOptions, Rule | null>> = {
  url: null,
  WebSocket: ofType('function', 'a WebSocket class'),
  protocols: perDial(protocolList),
  encoding: (value, key) => {
    if (value === 'json') return;
    const codec = value as Partial<WireCodec> | null;
    if (
      typeof codec !== 'object' ||
      codec === null ||
      typeof codec.subprotocol !== 'string' ||
      typeof codec.encode !== 'function' ||
      typeof codec.decode !== 'function' ||
      typeof codec.check !== 'function' ||
      typeof codec.toText !== 'function' ||
      typeof codec.toBinary !== 'function'
    )
      refuse(
        key,
        '"json" or a codec (msgpack from wsrpc-gateway/msgpack, cbor from wsrpc-gateway/cbor)',
        value,
      );
  },
  headers: perDial(headerRecord),
  getToken: fn,
  tokenTransport: oneOf('in-band', 'header'),
  reconnect: orFalse(
    'an object { initialDelayMs, maxDelayMs, factor, jitter, resetAfterMs, onAuthFailure, maxAttempts }',
  ),
  connectTimeoutMs: numberIn(1, Infinity),
  callTimeoutMs: callMs,
  callTimeout: callMs,
  whenDisconnected: oneOf('queue', 'reject'),
  maxQueued: count(0),
  maxPendingCalls: count(1),
  maxJoined: count(0),
  maxBufferedBytes: count(0),
  maxMessageBytes: count(0),
  batchCalls: count(0),
  heartbeat: orFalse('an object { intervalMs, timeoutMs }'),
  networkEvents: ofType('boolean'),
  inbox: ofType('boolean'),
  subscriptionMethods: ofType('object', 'an object { subscribe, notification, unsubscribe }'),
  logger: ofType('object', 'a logger'),
  middleware: middlewareRule,
};

export const reconnectRules: Readonly<Record<keyof ReconnectOptions, Rule>> = {
  initialDelayMs: ms(0),
  maxDelayMs: ms(0),
  factor: numberIn(1, Infinity),
  jitter: numberIn(0, 1),
  resetAfterMs: ms(0, Infinity),
  onAuthFailure: oneOf('stop', 'retry'),
  maxAttempts: (value, key) => {
    if (value !== Infinity) numberIn(0, Infinity, true, ' or Infinity')(value, key);
  },
};

export const heartbeatRules: Readonly<Record<'intervalMs' | 'timeoutMs', Rule>> = {
  intervalMs: ms(1),
  timeoutMs: ms(1, Infinity),
};

const methodRules = { subscribe: name, notification: name, unsubscribe: name, history: name };

/**
 * A gateway URL that parses (relative to the page's, in a browser): ws:, wss:, http: or https:,
 * or whatever scheme the WebSocket class given takes (tcp: for `tcpSocket`). For the platform's
 * own WebSocket (`native`), one of those four, given back absolute with http: as ws: and https:
 * as wss:, as browsers older than 2024 take it only so: "localhost:8080/rpc" (no scheme, read as
 * a scheme "localhost:") is refused here, rather than by every dial in silence.
 */
export function checkUrl(url: unknown, key: string, native = false): string {
  if (typeof url !== 'string') refuse(key, 'a URL string', url);
  let parsed: URL | undefined;
  try {
    parsed = new URL(url, (globalThis as { location?: { href: string } }).location?.href);
  } catch {
    // Shown without query string or userinfo: tokens travel there.
  }
  if (!parsed) refuse(key, 'a URL such as "wss://host/rpc"', redactUrl(url), true);
  if (!native) return url;
  const scheme = /^(?:ws|http)(s?):$/.exec(parsed.protocol);
  if (!scheme) {
    const what = `a ws:, wss:, http: or https: URL such as "wss://host/rpc" (this one's scheme is "${parsed.protocol}")`;
    refuse(key, what, redactUrl(url), true);
  }
  parsed.protocol = `ws${scheme[1]}:`;
  return parsed.href;
}

/**
 * Whether `WebSocket` is the platform's own (a browser's, Node 22's), not a class the application
 * gave: the global one, unless that is `ws`'s (an EventEmitter, put there by an application,
 * which takes its own schemes such as ws+unix:).
 */
export function isNativeSocket(WebSocket: unknown): boolean {
  return (
    WebSocket === (globalThis as { WebSocket?: unknown }).WebSocket &&
    typeof (WebSocket as { prototype?: { on?: unknown } } | undefined)?.prototype?.on !== 'function'
  );
}

/**
 * Check `createClient`'s options and fill in their defaults: an unknown option, or a value of
 * the wrong type, is a TypeError; one out of range a RangeError; each names the option.
 */
export function resolveClientOptions(options: unknown): ClientConfig {
  if (!isRecord(options)) refuse('createClient options', 'an object { url, ... }', options);
  const o = checkOptions(options, clientOptionRules, '', 'createClient', [
    'callTimeout',
  ]) as Partial<ClientOptions>;
  // The options given (checked, none undefined) go over the defaults; these are made anew.
  const { url, reconnect, heartbeat, encoding, callTimeout: _old, ...given } = o;
  const urlOf = typeof url === 'function' ? url : undefined;
  const list = typeof url === 'string' ? [url] : urlOf ? [] : url;
  if (!Array.isArray(list) || (list.length === 0 && !urlOf)) {
    refuse('url', 'a URL or a non-empty array of URLs', url);
  }
  const WebSocket = o.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (!WebSocket) {
    throw new TypeError(
      'No WebSocket implementation: pass { WebSocket } (in Node 20: import { WebSocket } from "ws")',
    );
  }
  const d = clientDefaults;
  const sendsHeaders = o.headers
    ? 'headers'
    : o.getToken && o.tokenTransport === 'header'
      ? 'tokenTransport "header"'
      : '';
  // Only the `ws` class (an EventEmitter) takes headers; a browser's WebSocket has no way to.
  if (sendsHeaders && typeof (WebSocket.prototype as { on?: unknown }).on !== 'function') {
    throw new TypeError(
      `${sendsHeaders} needs the WebSocket of the ws package (Node): this WebSocket cannot send headers; use tokenTransport "in-band"`,
    );
  }
  return Object.freeze({
    ...d,
    ...given,
    urls: Object.freeze(
      list.map((u, i) =>
        checkUrl(u, typeof url === 'string' ? 'url' : `url[${i}]`, isNativeSocket(WebSocket)),
      ),
    ),
    urlOf,
    WebSocket,
    encoding: encoding === 'json' ? undefined : encoding,
    reconnect: merged(reconnect, d.reconnect, reconnectRules, 'reconnect'),
    callTimeoutMs:
      (renamed(o, 'callTimeoutMs', 'callTimeout') as number | undefined) ?? d.callTimeoutMs,
    heartbeat: merged(heartbeat, d.heartbeat, heartbeatRules, 'heartbeat'),
    subscriptionMethods: merged(
      o.subscriptionMethods,
      d.subscriptionMethods,
      methodRules,
      'subscriptionMethods',
    ) as Readonly<ClientSubscriptionMethods>,
    logger: o.logger ?? silentLogger,
    middleware: o.middleware && Object.freeze([...o.middleware]),
    // Options not given (protocols, headers, getToken) are absent, which reads as undefined.
  }) as ClientConfig;
}

/** The fields of an object option checked by `rules` over `defaults`, frozen; false stays false. */
function merged<T extends object>(
  value: unknown,
  defaults: T,
  rules: Readonly<Record<string, Rule>>,
  name: string,
): Readonly<T> | false {
  return value === false
    ? false
    : Object.freeze({ ...defaults, ...checkOptions(value, rules, `${name}.`, name) });
}

// The options createClient takes. Apart from the client so that its connection lifecycle
// (client-connection.ts) and its call API (client.ts) can both read them without importing
// each other.
import type { Logger } from '../peer/logger.js';
import type { WebSocketConstructor } from '../transport/websocket-transport.js';
import type { BackoffOptions } from './backoff.js';
import type { ClientSubscriptionMethods } from './subscriptions.js';

export interface ClientOptions {
  /** Gateway URL, or several: on failure the client moves on to the next one. */
  url: string | readonly string[];
  /** WebSocket class. Default `globalThis.WebSocket`; in Node 20 pass `WebSocket` from `ws`. */
  WebSocket?: WebSocketConstructor;
  /** Subprotocols to offer (e.g. a token, since browsers cannot set headers). */
  protocols?: string | string[];
  /**
   * Reconnect with capped exponential backoff; `false` to stay closed after a drop. The
   * backoff starts again from `initialDelayMs` only once a connection has stayed open for
   * `resetAfterMs` (default 5 s). The same backoff paces resubscribing after a transient
   * subscribe error (-32009 Broker unavailable, a timeout).
   */
  reconnect?: Partial<BackoffOptions> | false;
  /** Give up on a connection attempt after this many ms. Default 10 000. */
  connectTimeoutMs?: number;
  /** Default timeout of calls in ms; 0 waits forever. Default 30 000. */
  callTimeout?: number;
  /** Calls made while not connected: queue them until the next connection (default) or reject at once. */
  whenDisconnected?: 'queue' | 'reject';
  /** Most calls and notifications queued while disconnected. Default 100. */
  maxQueued?: number;
  /** Most calls awaiting a response at once. Default 1 024. */
  maxPendingCalls?: number;
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
}

// The messages a tab and the worker holding the connection exchange over a MessagePort. Each
// port is one tab; the ids a tab picks (calls, subscriptions, status observers) are its own,
// and the ids of the worker's runs (a server-to-client call handed to a tab) are the worker's.
// Everything in them is structured-cloneable: errors travel as WireError.
import type { BatchEntry } from '../../peer/peer-core.js';
import type { RequestId, Params } from '../../protocol/types.js';
import type { ConnectionState } from '../connection-state.js';
import type { HistoryOptions } from '../history.js';
import type { InboxGap } from '../inbox.js';
import type { SubscriptionEvent } from '../subscriptions.js';
import type { SubscriptionStatusState } from '../subscription-status.js';
import type { ForwardedOptions } from './options.js';
import type { WireError } from './wire-errors.js';

/** From a tab to the worker. */
export type TabMessage =
  /** First on every port (and again after `gone`): the options, if the worker has no client yet. */
  | { t: 'hello'; options: ForwardedOptions; token: boolean }
  | { t: 'call'; id: number; method: string; params: Params | undefined; timeoutMs?: number }
  /** Answered with a `result` whose result is one WireSettled per entry. */
  | { t: 'batch'; id: number; entries: BatchEntry[]; timeoutMs?: number }
  | { t: 'history'; id: number; topic: string; options: HistoryOptions }
  /** `authenticate(token)` of the worker's client: without a token, its getToken is asked. */
  | { t: 'auth'; id: number; token?: string }
  /** Ends a `call`, `batch`, `history` or `auth` before its result. */
  | { t: 'cancel'; id: number }
  | { t: 'notify'; method: string; params: Params | undefined }
  | { t: 'sub'; id: number; topic: string; params: unknown }
  | { t: 'status'; id: number; topic: string; params: unknown }
  /** The joined subscriptions announced from now on (`joined$`), each as a `join`. */
  | { t: 'joins'; id: number }
  /** The messages of the joined subscription the worker announced as `jid`. */
  | { t: 'jsub'; id: number; jid: number }
  /** The inbox's gaps (`inboxGaps$`), each as a `gap`. */
  | { t: 'gaps'; id: number }
  /** Ends a `sub`, `status`, `joins`, `jsub` or `gaps`. */
  | { t: 'unsub'; id: number }
  | { t: 'register'; method: string }
  | { t: 'unregister'; method: string }
  /** A run's outcome; `missing`: this tab has no handler for it (any more). */
  | { t: 'answer'; id: number; result?: unknown; error?: WireError; missing?: true }
  /** The answer to `ping`, and a tab's "still here" after it was frozen or cached. */
  | { t: 'pong' }
  | { t: 'bye' };

/** A subscription status as it crosses: its error as a WireError. */
export interface WireStatus {
  state: SubscriptionStatusState;
  error?: WireError;
  missed?: number | null;
  seq?: number;
}

/** One entry of a batch's outcome as it crosses: a PromiseSettledResult, its reason a WireError. */
export type WireSettled =
  { status: 'fulfilled'; value: unknown } | { status: 'rejected'; reason: WireError };

/** A DisconnectEvent as it crosses. */
export interface WireDisconnect {
  code?: number;
  reason?: string;
  httpStatus?: number;
  error?: WireError;
  willRetry: boolean;
}

/** From the worker to a tab. */
export type HostMessage =
  | { t: 'state'; state: ConnectionState }
  | { t: 'disconnect'; event: WireDisconnect }
  /** The worker could not make a client of the options: the tab closes with this error. */
  | { t: 'fail'; error: WireError }
  | { t: 'result'; id: number; result?: unknown; error?: WireError }
  | { t: 'msg'; id: number; event: SubscriptionEvent<unknown> }
  | { t: 'status'; id: number; status: WireStatus }
  /** On a `joins` stream: the server joined this connection to `topic`; `jsub` reads it. */
  | { t: 'join'; id: number; topic: string; jid: number }
  | { t: 'gap'; id: number; gap: InboxGap }
  /** A stream ended by the worker's side: completed, or failed with `error`. */
  | { t: 'end'; id: number; error?: WireError }
  /** A notification from the server, to every tab. */
  | { t: 'note'; method: string; params: Params | undefined }
  /**
   * A server-to-client call (or notification: no answer wanted) for this tab's handler;
   * method `rpc.token` asks for a token from the tab's getToken.
   */
  | {
      t: 'run';
      id: number;
      method: string;
      params: Params | undefined;
      rid: RequestId | undefined;
      traceparent: string | undefined;
      notification: boolean;
    }
  | { t: 'abort'; id: number }
  /**
   * A notification from the server (`note`, or `run` for a handler) the worker could not post
   * to this tab (structured cloning refused it): `error` (-32603) says why. The tab logs it.
   */
  | { t: 'unposted'; method: string; error: WireError }
  /** The last `unposted` was a message of the user's inbox: one gap on `inboxGaps$`. */
  | { t: 'lost' }
  /** A `register` the worker did not take (the tab holds `maxHandlersPerTab` already). */
  | { t: 'refused'; method: string; error: WireError }
  | { t: 'ping' }
  /** This port's tab was let go (it said bye, or missed heartbeats): say hello again. */
  | { t: 'gone' };

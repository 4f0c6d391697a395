// The messages a tab and the worker holding the connection exchange over a MessagePort. Each
// port is one tab; the ids a tab picks (calls, subscriptions, status observers) are its own,
// and the ids of the worker's runs (a server-to-client call handed to a tab) are the worker's.
// Everything in them is structured-cloneable: errors travel as WireError, and the params of a
// tab's requests as JSON text (SentParams).
import { ConnectionClosedError } from '../../protocol/local-errors.js';
import type { RequestId, Params } from '../../protocol/types.js';
import type { ConnectionState } from '../connection-state.js';
import type { HistoryOptions } from '../history.js';
import type { InboxGap } from '../inbox.js';
import type { SubscriptionEvent } from '../subscriptions.js';
import type { SubscriptionStatusState } from '../subscription-status.js';
import type { ForwardedOptions } from './options.js';
import type { WireError } from './wire-errors.js';

/**
 * The version of the messages below. A tab states it in its `hello`, the worker in its first
 * answer (`welcome`, or `fail`); the messages before the version was stated are version 1. A
 * tab and a worker of different versions do not talk at all: one copy of the page's code can
 * attach to a SharedWorker another copy started (same script URL and name), and each would
 * misread what the other posts. Raise it with any change to these messages that a tab or a
 * worker of the other version would misread or leave unanswered.
 */
export const SHARED_PROTOCOL_VERSION = 3;

/**
 * The params of a tab's call, notification or subscription as they cross to the worker: the JSON
 * text of `[params]` (undefined: none). The tab makes it as a client of its own sends them:
 * toJSON applied (a URL, a Date, a money or decimal class), what JSON leaves out left out, as a
 * member of an array (undefined and functions as null); structured cloning keeps neither toJSON
 * nor any prototype, and refuses a URL. Text is cloned by copying it, where the object graph
 * made again from it would cost the page's main thread a parse and a deep clone more (for a few
 * thousand rows of params, several times the stringify alone). The worker reads it back with
 * readSent.
 */
export type SentParams = string | undefined;

/**
 * `params` as SentParams. Throws JSON.stringify's TypeError for what JSON cannot carry (a
 * BigInt, a cycle), as a client's own call, notify and subscribe do.
 */
export function sentParams(params: unknown): SentParams {
  return params === undefined ? undefined : JSON.stringify([params]);
}

/**
 * The value a SentParams holds. Anything else (a tab that posts what this version's tabs do
 * not) is taken as it came, for the client's own checks of params to refuse or send, rather
 * than throw in the worker's message handler.
 */
export function readSent<T = unknown>(sent: SentParams): T | undefined {
  if (typeof sent !== 'string') return sent as T | undefined;
  try {
    const value: unknown = JSON.parse(sent);
    if (Array.isArray(value) && value.length === 1) return value[0] as T;
  } catch {
    // Not JSON: as it came.
  }
  return sent as T;
}

/** A batch entry as it crosses to the worker: its params as SentParams. */
export interface SentBatchEntry {
  method: string;
  params?: SentParams;
  notification?: boolean;
}

/**
 * Why a tab speaking `tab` and a worker speaking `worker` cannot share the connection, and what
 * fixes it: reloading the tab with the older code, or a worker `name` per version. Worded the
 * same by the worker refusing a tab and by a tab hearing another version, whichever is older;
 * `undefined` is a side from before the version was stated.
 */
export function otherVersionError(tab: unknown, worker: unknown): ConnectionClosedError {
  const number = (v: unknown): number => (typeof v === 'number' ? v : 1);
  const said = (v: unknown): string =>
    typeof v === 'number' ? `version ${v}` : 'version 1 (from before the version was stated)';
  const fix =
    number(tab) < number(worker)
      ? 'this tab runs older code than the worker: reload this tab'
      : 'the worker is older, kept alive by another tab of this site that runs older code (same script URL and name): reload or close the other tabs';
  return new ConnectionClosedError(
    `The shared worker speaks the tab/worker protocol ${said(worker)} and this tab ${said(tab)}; ` +
      `${fix}. A createSharedClient \`name\` that changes with each version of the code gives each version a worker of its own.`,
  );
}

/** From a tab to the worker. */
export type TabMessage =
  /**
   * First on every port (and again after `gone`): the tab's SHARED_PROTOCOL_VERSION, and the
   * options, if the worker has no client yet.
   */
  | { t: 'hello'; v: number; options: ForwardedOptions; token: boolean }
  | { t: 'call'; id: number; method: string; params: SentParams; timeoutMs?: number }
  /** Answered with a `result` whose result is one WireSettled per entry. */
  | { t: 'batch'; id: number; entries: SentBatchEntry[]; timeoutMs?: number }
  | { t: 'history'; id: number; topic: string; options: HistoryOptions }
  /** `authenticate(token)` of the worker's client: without a token, its getToken is asked. */
  | { t: 'auth'; id: number; token?: string }
  /** Ends a `call`, `batch`, `history` or `auth` before its result. */
  | { t: 'cancel'; id: number }
  | { t: 'notify'; method: string; params: SentParams }
  | { t: 'sub'; id: number; topic: string; params: SentParams }
  | { t: 'status'; id: number; topic: string; params: SentParams }
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
  /**
   * The tab is leaving (closed, or its page hidden). Its `call`, `batch`, `notify` and `cancel`
   * after it (posted by the page's own pagehide listeners) are still sent, and not answered.
   */
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
  /**
   * First on a port whose hello the worker took, before anything else it posts there: its
   * SHARED_PROTOCOL_VERSION, the tab's, and the worker client's `whenDisconnected` (fixed in
   * the worker script, or an earlier tab's), which the tab's notify acts on.
   */
  | { t: 'welcome'; v: number; whenDisconnected?: 'queue' | 'reject' }
  /** `error` with `closed`: why the worker's client stopped for good. */
  | { t: 'state'; state: ConnectionState; error?: WireError }
  | { t: 'disconnect'; event: WireDisconnect }
  /**
   * The worker did not take the hello: it could not make a client of the options, or the tab
   * speaks another version. `v` is the worker's version. The tab closes with this error (a tab
   * of version 1, which reads no `v`, too: so it is told why).
   */
  | { t: 'fail'; error: WireError; v: number }
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

// createSharedClient's options: which of createClient's options reach the worker (data only:
// a function cannot be posted to it), the few of its own, and the check that refuses a wrong
// one in the tab, naming it, before anything is posted.
import type { Logger } from '../../peer/logger.js';
import {
  checkOptions,
  isRecord,
  numberIn,
  ofType,
  oneOf,
  refuse,
} from '../../peer/option-rules.js';
import type { Rule } from '../../peer/option-rules.js';
import { checkUrl, clientOptionRules, heartbeatRules, reconnectRules } from '../client-options.js';
import type { ClientOptions, GetToken } from '../client-options.js';
import { SHARED_PROTOCOL_VERSION } from './messages.js';

/** createClient's options that the worker's client is made with: data, posted to it. */
export type ForwardedOptions = Pick<
  ClientOptions,
  | 'reconnect'
  | 'connectTimeoutMs'
  | 'callTimeoutMs'
  | 'whenDisconnected'
  | 'maxQueued'
  | 'maxPendingCalls'
  | 'maxJoined'
  | 'maxBufferedBytes'
  | 'maxMessageBytes'
  | 'batchCalls'
  | 'heartbeat'
  | 'networkEvents'
  | 'inbox'
  | 'subscriptionMethods'
> & {
  /** The gateway, or several, tried in turn; resolved against the page's URL in the tab. */
  url: string | readonly string[];
  protocols?: string | string[];
  /** See SharedClientOptions.tabHeartbeatMs. */
  tabHeartbeatMs?: number;
};

/** What `worker` returns: a SharedWorker, or anything with a port to one. */
export interface SharedWorkerLike {
  readonly port: MessagePort;
  addEventListener?(type: 'error', listener: () => void): void;
}

export interface SharedClientOptions extends ForwardedOptions {
  /**
   * Where the worker script is served (dist/browser/shared-worker.js, or a script that calls
   * `shareClient`): same origin as the page. One of `workerUrl` and `worker` is needed unless
   * the fallback is taken.
   */
  workerUrl?: string | URL;
  /**
   * Makes the SharedWorker, instead of `workerUrl`: for bundlers that find
   * `new SharedWorker(new URL('./worker.ts', import.meta.url), { type: 'module' })` in code.
   */
  worker?: () => SharedWorkerLike;
  /**
   * The SharedWorker's name: tabs with the same script and name share one worker, and so one
   * connection, made with the options of the tab that came first. Default
   * `wsrpc v<version> <urls>` (the version of the messages a tab and the worker exchange, 2 in
   * this release: tabs whose code speaks another version get a worker of their own). A name of
   * your own is best made to change with each version of your code: a tab and a worker of
   * other versions refuse each other.
   */
  name?: string;
  /**
   * Where SharedWorker is missing, or the worker fails to start or does not answer within
   * `connectTimeoutMs`: `'per-tab'`, a connection of the tab's own (a plain client, behind the
   * same API); `'throw'`, a TypeError where SharedWorker is missing, and a client closed with
   * ConnectionClosedError where the worker fails. Either is logged at warn (the tab's `logger`,
   * or the console). Default 'per-tab'.
   */
  fallback?: 'per-tab' | 'throw';
  /**
   * How often the worker pings each tab, in ms; a tab that has not answered two pings is
   * taken as closed and its subscriptions and handlers are let go. Default 5 000.
   */
  tabHeartbeatMs?: number;
  /**
   * The token provider, called in a tab whenever the worker's client needs a token (before
   * each dial, and when the server asks for a fresh one): any tab that gave one answers. Its
   * `signal` aborts when the worker no longer wants that token (see TokenRequest).
   */
  getToken?: GetToken;
  /** Where this tab's handlers of server-to-client calls log (`ctx.logger`). */
  logger?: Logger;
}

/** The tab's options, checked: what is posted to the worker and what stays in the tab. */
export interface SharedClientConfig {
  readonly forwarded: ForwardedOptions;
  readonly workerUrl: string | undefined;
  readonly worker: (() => SharedWorkerLike) | undefined;
  readonly name: string;
  readonly fallback: 'per-tab' | 'throw';
  readonly getToken: GetToken | undefined;
  readonly logger: Logger | undefined;
}

const MAX_DELAY_MS = 2 ** 31 - 1;

/** The options createSharedClient has and createClient has not (docs/options.md lists them). */
export const sharedOnlyRules: Readonly<Record<string, Rule>> = {
  workerUrl: (value, key) => {
    if (typeof value !== 'string' && !(value instanceof URL)) refuse(key, 'a URL string', value);
  },
  worker: ofType('function'),
  name: ofType('string'),
  fallback: oneOf('per-tab', 'throw'),
  tabHeartbeatMs: numberIn(1, MAX_DELAY_MS, true),
};

/** An object option checked key by key, or `false` where that is allowed. */
const nested =
  (rules: Readonly<Record<string, Rule>>, allowFalse: boolean): Rule =>
  (value, key) => {
    if (allowFalse && value === false) return;
    clientOptionRules[key as keyof ClientOptions]?.(value, key);
    checkOptions(value, rules, `${key}.`, key);
  };

const methodName = ofType('string');

const sharedRules: Readonly<Record<string, Rule | null>> = {
  url: null,
  protocols: (value, key) => {
    // A function would be called before each dial, in the worker, where it cannot be sent.
    if (typeof value === 'function') refuse(key, 'a string or an array of strings', value);
    clientOptionRules.protocols!(value, key);
  },
  reconnect: nested(reconnectRules, true),
  connectTimeoutMs: clientOptionRules.connectTimeoutMs,
  callTimeoutMs: clientOptionRules.callTimeoutMs,
  whenDisconnected: clientOptionRules.whenDisconnected,
  maxQueued: clientOptionRules.maxQueued,
  maxPendingCalls: clientOptionRules.maxPendingCalls,
  maxJoined: clientOptionRules.maxJoined,
  maxBufferedBytes: clientOptionRules.maxBufferedBytes,
  maxMessageBytes: clientOptionRules.maxMessageBytes,
  batchCalls: clientOptionRules.batchCalls,
  heartbeat: nested(heartbeatRules, true),
  networkEvents: clientOptionRules.networkEvents,
  inbox: clientOptionRules.inbox,
  subscriptionMethods: nested(
    {
      subscribe: methodName,
      notification: methodName,
      unsubscribe: methodName,
      history: methodName,
    },
    false,
  ),
  getToken: clientOptionRules.getToken,
  logger: clientOptionRules.logger,
  ...sharedOnlyRules,
};

/**
 * Check createSharedClient's options: an unknown one, or a value of the wrong type, is a
 * TypeError naming it (createClient's code options other than getToken and logger included:
 * they cannot reach the worker); one out of range a RangeError.
 */
export function resolveSharedClientOptions(options: unknown): SharedClientConfig {
  if (!isRecord(options)) refuse('createSharedClient options', 'an object { url, ... }', options);
  const o = checkOptions(
    options,
    sharedRules,
    '',
    'createSharedClient',
  ) as Partial<SharedClientOptions>;
  const { url, workerUrl, worker, name, fallback, getToken, logger, ...rest } = o;
  if (workerUrl === undefined && worker === undefined) {
    refuse('workerUrl', 'given (or worker): where the SharedWorker script is served', workerUrl);
  }
  const base = (globalThis as { location?: { href: string } }).location?.href;
  let urls: string[];
  if (typeof url === 'string') urls = [checkUrl(url, 'url')];
  else if (Array.isArray(url) && url.length > 0) urls = url.map((u, i) => checkUrl(u, `url[${i}]`));
  else
    refuse('url', 'a URL or a non-empty array of URLs (a function cannot reach the worker)', url);
  // The worker's own location is its script's: relative URLs are made absolute here.
  urls = urls.map((u) => new URL(u, base).href);
  return Object.freeze({
    forwarded: { ...rest, url: urls },
    workerUrl: workerUrl === undefined ? undefined : new URL(workerUrl, base).href,
    worker,
    // With the version: tabs of another version of this package get a worker of their own.
    name: name ?? `wsrpc v${SHARED_PROTOCOL_VERSION} ${urls.join(' ')}`,
    fallback: fallback ?? 'per-tab',
    getToken,
    logger,
  });
}

import { useCallback, useMemo, useSyncExternalStore } from 'react';
import type { SubscriptionStatus } from '../client/subscription-status.js';
import { nameOf } from '../peer/method-descriptor.js';
import type { ParamsArgs, SubscriptionDescriptor } from '../peer/method-descriptor.js';
import { useProvidedClient } from './client-context.js';
import { idOf, storeFor } from './shared-store.js';
import { jsonKey } from './use-call.js';
import { resolveSubscriptionOptions } from './subscription-options.js';
import { SubscriptionStore } from './subscription-store.js';
import type { Parse, SubscriptionSnapshot } from './subscription-store.js';

export interface UseSubscriptionOptions {
  /** How many of the last messages `history` keeps (default 0: none; a fraction is floored). */
  history?: number;
  /** False: not subscribed (status 'closed') until it turns true. Default true. */
  enabled?: boolean;
  /**
   * With an async parse (a contract's schema that parses asynchronously, `createHooks`): the
   * most messages held while they wait for it (an integer, default 1 000, as `iterate`'s).
   */
  bufferSize?: number;
  /**
   * A message arriving with that buffer full: `'drop-oldest'` (default) drops the oldest one
   * waiting and counts it in `dropped`; `'error'` ends the subscription with
   * BufferOverflowError (status 'error'), the messages waiting dropped.
   */
  overflow?: 'drop-oldest' | 'error';
}

/** What `useSubscription` returns. */
export interface UseSubscriptionResult<T> {
  /**
   * Where the subscription stands (`subscriptionStatus$`): 'connecting', 'subscribed',
   * 'resuming' after a lost connection, 'gap' (shown until the next message), 'error',
   * 'closed'; with the last sequence number seen (`seq`) on a numbered topic.
   */
  status: SubscriptionStatus;
  /** The latest message; undefined before the first. */
  data: T | undefined;
  /** The last `options.history` messages, oldest first. */
  history: readonly T[];
  /** What ended it: the server's refusal (a JsonRpcError), a stream's error. */
  error: unknown;
  /**
   * Messages dropped unparsed since it subscribed (or `reset`), the buffer waiting for an
   * async parse being full (`overflow: 'drop-oldest'`); 0 without an async parse.
   */
  dropped: number;
  /** Unsubscribe and subscribe again, fresh (no data, history or error), for every component showing it. */
  reset: () => void;
}

const CLOSED: SubscriptionSnapshot<never> = {
  status: { state: 'closed' },
  data: undefined,
  history: [],
  error: undefined,
  dropped: 0,
};
/** Before the provider has made its client (on the server, while hydrating). */
const NOT_YET: SubscriptionSnapshot<never> = { ...CLOSED, status: { state: 'connecting' } };
const noUnsubscribe = (): void => undefined;

/**
 * The shared subscription to `topic` with `params`, each message through `parse` when given.
 * Used by `useSubscription` and by the contract's hooks (`createHooks`).
 */
export function useSharedSubscription<T>(
  topic: string,
  params: unknown,
  options: UseSubscriptionOptions,
  parse?: Parse,
  spec?: object,
): UseSubscriptionResult<T> {
  const client = useProvidedClient();
  const { enabled = true } = options;
  const { history: count, bufferSize, overflow } = options;
  const { window, buffer } = useMemo(
    () => resolveSubscriptionOptions(count, bufferSize, overflow),
    [count, bufferSize, overflow],
  );
  // The buffer is in the key only where there is a parse to wait for: without one it holds
  // nothing, and components that differ only in it share the store.
  const waits = parse ? `${buffer.bufferSize} ${buffer.overflow} ` : '';
  // Params JSON cannot carry have a key of their own: the subscribe's TypeError shows as `error`.
  const key = `${idOf(spec)} ${waits}${jsonKey(topic, params)}`;
  const store = useCallback(
    () =>
      client &&
      storeFor(client, key, () => new SubscriptionStore<T>(client, topic, params, parse, buffer)),
    // The topic, params, parse and buffer of the render that makes the store: same key, same ones.
    [client, key],
  );
  const subscribe = useCallback(
    (onChange: () => void) => (enabled && store()?.listen(onChange, window)) || noUnsubscribe,
    [store, enabled, window],
  );
  const get = useCallback(
    (): SubscriptionSnapshot<T> => (enabled ? (store()?.get() ?? NOT_YET) : CLOSED),
    [store, enabled],
  );
  const snapshot = useSyncExternalStore(subscribe, get, get);
  const reset = useCallback(() => {
    if (enabled) store()?.reset();
  }, [store, enabled]);
  const { history } = snapshot;
  const shown = useMemo(
    () => (history.length <= window ? history : history.slice(history.length - window)),
    [history, window],
  );
  return useMemo(
    () => ({
      status: snapshot.status,
      data: snapshot.data,
      history: shown,
      error: snapshot.error,
      dropped: snapshot.dropped,
      reset,
    }),
    [snapshot, shown, reset],
  );
}

/**
 * Subscribe to `topic` (with `params`) while the component is mounted: the subscription's
 * status, the latest message, a window of the last ones (`options.history`) and `reset`.
 * Components showing the same topic and params share one store, and the client one wire
 * subscription; StrictMode's unmount and remount keeps it (one subscribe on the wire). The
 * last component's unmount unsubscribes.
 */
export function useSubscription<P, T>(
  descriptor: SubscriptionDescriptor<P, T>,
  ...args: ParamsArgs<P, [options?: UseSubscriptionOptions]>
): UseSubscriptionResult<T>;
export function useSubscription<T = unknown>(
  topic: string,
  params?: unknown,
  options?: UseSubscriptionOptions,
): UseSubscriptionResult<T>;
export function useSubscription(
  target: SubscriptionDescriptor | string,
  params?: unknown,
  options: UseSubscriptionOptions = {},
): UseSubscriptionResult<unknown> {
  return useSharedSubscription(nameOf(target), params, options);
}

import { useCallback, useMemo, useRef, useState, useSyncExternalStore } from 'react';
import type { RpcClient } from '../client/client.js';
import { canonicalJson } from '../client/canonical-json.js';
import { nameOf } from '../peer/method-descriptor.js';
import type { MethodDescriptor, ParamsArgs } from '../peer/method-descriptor.js';
import type { CallOptions } from '../peer/pending-calls.js';
import { NotConnectedError } from '../protocol/local-errors.js';
import type { Params } from '../protocol/types.js';
import { CallStore } from './call-store.js';
import type { CallSnapshot } from './call-store.js';
import { useProvidedClient } from './client-context.js';
import { useIsomorphicLayoutEffect } from './isomorphic.js';
import { idOf, storeFor } from './shared-store.js';

export type { CallSnapshot } from './call-store.js';

/** `useCall`'s options: the call's own (a timeout), and whether to make it at all. */
export interface UseCallOptions extends Pick<CallOptions, 'timeoutMs'> {
  /** False: no call is made (and `loading` is false) until it turns true. Default true. */
  enabled?: boolean;
}

/** What `useCall` returns. */
export interface UseCallResult<R> extends CallSnapshot<R> {
  /** Call again; the call under way, if any, is cancelled (rpc.cancel). */
  refetch: () => void;
}

/** A call's params as arguments: left out when the method takes none. */
export type ParamsArgument<P> = undefined extends P ? [params?: P] : [params: P];

/** What `useMutation` returns. */
export interface UseMutationResult<P, R> extends CallSnapshot<R> {
  /** Call; the outcome shows in `data` or `error` (the returned promise is not needed). */
  mutate: (...params: ParamsArgument<P>) => void;
  /** Call; resolves with the result or rejects with the error, which also show in the state. */
  mutateAsync: (...params: ParamsArgument<P>) => Promise<R>;
  /** Back to no data, no error, not loading; a call under way no longer shows. */
  reset: () => void;
}

const IDLE: CallSnapshot<never> = { data: undefined, error: undefined, loading: false };
/** Before the provider has made its client (on the server, while hydrating). */
const NOT_YET: CallSnapshot<never> = { data: undefined, error: undefined, loading: true };
const noUnsubscribe = (): void => undefined;

/** Makes the call with the provider's client; aborting `signal` cancels it. */
export type RunWith<R> = (client: RpcClient, signal: AbortSignal) => Promise<R>;

/**
 * The shared call `key` names, made by `run` by the first component that shows it. Used by
 * `useCall` and by the contract's hooks (`createHooks`).
 */
export function useSharedCall<R>(key: string, run: RunWith<R>, enabled: boolean): UseCallResult<R> {
  const client = useProvidedClient();
  const store = useCallback(
    () => client && storeFor(client, key, () => new CallStore<R>((signal) => run(client, signal))),
    // `run` is the one of the render that makes the store: same key, same call.
    [client, key],
  );
  const subscribe = useCallback(
    (onChange: () => void) => (enabled && store()?.subscribe(onChange)) || noUnsubscribe,
    [store, enabled],
  );
  const get = useCallback(
    (): CallSnapshot<R> => (enabled ? (store()?.get() ?? NOT_YET) : IDLE),
    [store, enabled],
  );
  const snapshot = useSyncExternalStore(subscribe, get, get);
  const refetch = useCallback(() => {
    if (enabled) store()?.refetch();
  }, [store, enabled]);
  return useMemo(() => ({ ...snapshot, refetch }), [snapshot, refetch]);
}

/**
 * The key of a call: its method, params, the contract's spec of it (0 without one) and its
 * timeout. Everything that changes the call is in it, so components share a call only when
 * each would have made that same call: one asking with another timeout gets a call of its own.
 * Params JSON cannot carry (a BigInt, a cycle) get a key of their own, by what is wrong with
 * them: the call's TypeError then shows as the hook's error, as a call that fails does.
 */
export function callKey(
  method: string,
  params: unknown,
  spec?: object,
  timeoutMs?: number,
): string {
  return `${idOf(spec)} ${timeoutMs ?? ''} ${jsonKey(method, params)}`;
}

/** `[name, params]` as canonical JSON; for params it cannot write, why not (no JSON is `!`). */
export function jsonKey(name: string, params: unknown): string {
  try {
    return canonicalJson(params === undefined ? [name] : [name, params]);
  } catch (error) {
    return `!${JSON.stringify(name)} ${String(error)}`;
  }
}

/**
 * Call `method` with `params` when the component mounts, and again when they change: the
 * result (`data`), the failure (`error`) and whether a call is under way (`loading`). Components
 * that ask for the same method, params and `timeoutMs` share one call (`enabled` is each
 * component's own). The call is cancelled (rpc.cancel
 * tells the server) when the last of them unmounts or moves to other params before it is
 * answered. StrictMode's remount keeps the call it made.
 */
export function useCall<P extends Params | undefined, R>(
  descriptor: MethodDescriptor<P, R>,
  ...args: ParamsArgs<P, [options?: UseCallOptions]>
): UseCallResult<R>;
export function useCall<R = unknown>(
  method: string,
  params?: Params,
  options?: UseCallOptions,
): UseCallResult<R>;
export function useCall(
  target: MethodDescriptor<Params | undefined, unknown> | string,
  params?: Params,
  options: UseCallOptions = {},
): UseCallResult<unknown> {
  const method = nameOf(target);
  const { enabled = true, timeoutMs } = options;
  return useSharedCall(
    callKey(method, params, undefined, timeoutMs),
    (client, signal) => client.call(method, params, { signal, timeoutMs }),
    enabled,
  );
}

/**
 * The state of calls made on demand (`mutate(params)`, from an event handler): the last
 * result, error and whether one is under way. Each component has its own. A call under way
 * when the component unmounts is not cancelled (what it changes on the server still happens);
 * its outcome just no longer shows. Every state of the latest call is shown, even for a call
 * made before the component's effects ran (from a child's effect, a layout effect): React 18
 * and later ignore a state set after unmount, so nothing needs to wait for the mount.
 */
export function useMutationWith<P, R>(
  run: (client: RpcClient, params: P) => Promise<R>,
): UseMutationResult<P, R> {
  const client = useProvidedClient();
  const [state, setState] = useState<CallSnapshot<R>>(IDLE);
  const latest = useRef(0);
  const current = useRef({ client, run });
  useIsomorphicLayoutEffect(() => {
    current.current = { client, run };
  });
  const mutateAsync = useCallback((...[params]: ParamsArgument<P>): Promise<R> => {
    const call = ++latest.current;
    const show = (next: (now: CallSnapshot<R>) => CallSnapshot<R>): void => {
      if (latest.current === call) setState(next);
    };
    show((now) => ({ ...now, error: undefined, loading: true }));
    let running: Promise<R>;
    try {
      const made = current.current;
      if (!made.client) throw new NotConnectedError('useMutation: the client is not made yet');
      running = made.run(made.client, params as P);
    } catch (error) {
      running = Promise.reject(error as Error);
    }
    return running.then(
      (data) => {
        show(() => ({ data, error: undefined, loading: false }));
        return data;
      },
      (error: unknown) => {
        show((now) => ({ ...now, error, loading: false }));
        throw error;
      },
    );
  }, []);
  const mutate = useCallback(
    (...params: ParamsArgument<P>) => void mutateAsync(...params).catch(() => undefined),
    [mutateAsync],
  );
  const reset = useCallback(() => {
    latest.current++;
    setState(IDLE);
  }, []);
  return useMemo(
    () => ({ ...state, mutate, mutateAsync, reset }),
    [state, mutate, mutateAsync, reset],
  );
}

/** `useMutationWith` for `method`: `mutate(params)` calls it. */
export function useMutation<P extends Params | undefined, R>(
  descriptor: MethodDescriptor<P, R>,
  options?: Pick<CallOptions, 'timeoutMs'>,
): UseMutationResult<P, R>;
export function useMutation<R = unknown>(
  method: string,
  options?: Pick<CallOptions, 'timeoutMs'>,
): UseMutationResult<Params | undefined, R>;
export function useMutation(
  target: MethodDescriptor<Params | undefined, unknown> | string,
  options: Pick<CallOptions, 'timeoutMs'> = {},
): UseMutationResult<Params | undefined, unknown> {
  const method = nameOf(target);
  return useMutationWith((client, params: Params | undefined) =>
    client.call(method, params, options),
  );
}

import type { CallOptions } from '../peer/pending-calls.js';
import type { Params } from '../protocol/types.js';
import type { CallParams, CallResult, MethodSpec } from './contract.js';

/** Anything that can call: a client, or a server Session (for the client's methods). */
export interface Caller {
  call(method: string, params?: Params, options?: CallOptions): Promise<unknown>;
}

/** A typed proxy: one function per method of the contract. */
export type MethodsApi<M extends Record<string, MethodSpec>> = {
  readonly [K in keyof M]: (
    params: CallParams<M[K]>,
    options?: CallOptions,
  ) => Promise<CallResult<M[K]>>;
};

/** `api.subtract([42, 23])` instead of `caller.call('subtract', [42, 23])`, checked by the compiler. */
export function bindMethods<M extends Record<string, MethodSpec>>(
  caller: Caller,
  methods: M,
): MethodsApi<M> {
  const api: Record<string, unknown> = {};
  for (const name of Object.keys(methods)) {
    api[name] = (params: Params | undefined, options?: CallOptions) =>
      caller.call(name, params, options);
  }
  return api as MethodsApi<M>;
}

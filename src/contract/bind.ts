import type { CallOptions } from '../peer/pending-calls.js';
import type { Params } from '../protocol/types.js';
import type { CallParams, CallResult, MethodSpec } from './contract.js';
import { validateResult } from './validate.js';

/** Anything that can call: a client, or a server Session (for the client's methods). */
export interface Caller {
  call(method: string, params?: Params, options?: CallOptions): Promise<unknown>;
}

/** A method's arguments: params may be left out when the method takes none. */
type Args<M> =
  undefined extends CallParams<M>
    ? [params?: CallParams<M>, options?: CallOptions]
    : [params: CallParams<M>, options?: CallOptions];

/** A typed proxy: one function per method of the contract. */
export type MethodsApi<M extends Record<string, MethodSpec>> = {
  readonly [K in keyof M]: (...args: Args<M[K]>) => Promise<CallResult<M[K]>>;
};

/**
 * `api.subtract([42, 23])` instead of `caller.call('subtract', [42, 23])`, checked by the
 * compiler. Results are parsed with the contract's result schema, so what the caller gets
 * is what its type says (defaults applied); a result that does not match rejects with -32603.
 */
export function bindMethods<M extends Record<string, MethodSpec>>(
  caller: Caller,
  methods: M,
): MethodsApi<M> {
  const api: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(methods)) {
    api[name] = (params: Params | undefined, options?: CallOptions) =>
      caller.call(name, params, options).then((result) => validateResult(spec, name, result));
  }
  return api as MethodsApi<M>;
}

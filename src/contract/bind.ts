import type { CallOptions } from '../peer/pending-calls.js';
import type { Params } from '../protocol/types.js';
import type { CallParams, CallResult, MethodSpec } from './contract.js';
import { nestNames } from './nested.js';
import type { Nested } from './nested.js';
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

/** One function per method, by its full name. */
export type MethodFunctions<M extends Record<string, MethodSpec>> = {
  [K in keyof M]: (...args: Args<M[K]>) => Promise<CallResult<M[K]>>;
};

/**
 * A typed proxy: one function per method of the contract, under its full name
 * (`api['chat.send']`) and, for a dotted name, as nested members (`api.chat.send`).
 */
export type MethodsApi<M extends Record<string, MethodSpec>> = Nested<MethodFunctions<M>>;

/**
 * `api.subtract([42, 23])` instead of `caller.call('subtract', [42, 23])`, checked by the
 * compiler; `api.chat.send(...)` and `api['chat.send'](...)` both call `chat.send`. Results
 * are parsed with the contract's result schema, so what the caller gets is what its type
 * says (defaults applied); a result that does not match rejects with -32603.
 */
export function bindMethods<M extends Record<string, MethodSpec>>(
  caller: Caller,
  methods: M,
): MethodsApi<M> {
  // No prototype: a method named "__proto__" is a key like any other.
  const functions = Object.create(null) as Record<string, object>;
  for (const [name, spec] of Object.entries(methods)) {
    functions[name] = (params: Params | undefined, options?: CallOptions) =>
      caller.call(name, params, options).then((result) => validateResult(spec, name, result));
  }
  return nestNames(functions) as MethodsApi<M>;
}

import type {
  CallParams,
  CallResult,
  Contract,
  MethodSpec,
  SubscriptionData,
  SubscriptionParams,
} from '../contract/contract.js';
import { nestNames } from '../contract/nested.js';
import type { Nested } from '../contract/nested.js';
import { specOfTopic } from '../contract/topic-names.js';
import type { SpecOfTopic, TopicNames } from '../contract/topic-names.js';
import { validateMessage, validateResult } from '../contract/validate.js';
import type { CallOptions } from '../peer/pending-calls.js';
import type { Params } from '../protocol/types.js';
import { callKey, useMutationWith, useSharedCall } from './use-call.js';
import type { UseCallOptions, UseCallResult, UseMutationResult } from './use-call.js';
import { useSharedSubscription } from './use-subscription.js';
import type { UseSubscriptionOptions, UseSubscriptionResult } from './use-subscription.js';

type MethodsOf<K extends Contract> = K['methods'];
type SubscriptionsOf<K extends Contract> = NonNullable<K['subscriptions']>;

/** A method's params and options as arguments: params left out when it takes none. */
type CallArgs<M> =
  undefined extends CallParams<M>
    ? [params?: CallParams<M>, options?: UseCallOptions]
    : [params: CallParams<M>, options?: UseCallOptions];

type SubscribeArgs<S> =
  undefined extends SubscriptionParams<S>
    ? [params?: SubscriptionParams<S>, options?: UseSubscriptionOptions]
    : [params: SubscriptionParams<S>, options?: UseSubscriptionOptions];

/** One method's hooks, as `ContractHooks.api` offers them: `api.chat.send.useCall(params)`. */
export interface MethodHooks<M> {
  /** `useCall` of this method. */
  readonly useCall: (...args: CallArgs<M>) => UseCallResult<CallResult<M>>;
  /** `useMutation` of this method. */
  readonly useMutation: (
    options?: Pick<CallOptions, 'timeoutMs'>,
  ) => UseMutationResult<CallParams<M>, CallResult<M>>;
}

/** The hooks, typed by a contract: names, params, results and messages are checked. */
export interface ContractHooks<K extends Contract> {
  /**
   * Each method's hooks by its name, and by its dotted name as a path:
   * `api.chat.send.useCall(params)` is `useCall('chat.send', params)`, as `useContract`'s
   * `api.chat.send(...)` is `call('chat.send', ...)`. Built once, by `createHooks`.
   */
  readonly api: Nested<{ [N in keyof MethodsOf<K> & string]: MethodHooks<MethodsOf<K>[N]> }>;
  /** `useCall` for a method of the contract; its result parsed with the result schema. */
  readonly useCall: <N extends keyof MethodsOf<K> & string>(
    name: N,
    ...args: CallArgs<MethodsOf<K>[N]>
  ) => UseCallResult<CallResult<MethodsOf<K>[N]>>;
  /** `useMutation` for a method of the contract; its result parsed with the result schema. */
  readonly useMutation: <N extends keyof MethodsOf<K> & string>(
    name: N,
    options?: Pick<CallOptions, 'timeoutMs'>,
  ) => UseMutationResult<CallParams<MethodsOf<K>[N]>, CallResult<MethodsOf<K>[N]>>;
  /**
   * `useSubscription` for a topic or stream of the contract (a wildcard topic under any of its
   * names); each message parsed with the `data` schema. One that does not match ends the
   * subscription with a local -32603 (`data: { subscription, issues }`), as `useContract` does.
   */
  readonly useSubscription: <N extends TopicNames<SubscriptionsOf<K>>>(
    name: N,
    ...args: SubscribeArgs<SpecOfTopic<SubscriptionsOf<K>, N>>
  ) => UseSubscriptionResult<SubscriptionData<SpecOfTopic<SubscriptionsOf<K>, N>>>;
}

/** The spec of `name`, or a TypeError naming what the contract lacks. */
function methodSpec(contract: Contract, name: string): MethodSpec {
  const spec = Object.hasOwn(contract.methods, name) ? contract.methods[name] : undefined;
  if (!spec) throw new TypeError(`"${name}" is not a method of the contract "${contract.name}"`);
  return spec;
}

/**
 * Hooks typed by `contract`, made once beside it (`export const { useCall, useMutation,
 * useSubscription, api } = createHooks(chat)`): `useCall('chat.send', ...)` (or
 * `api.chat.send.useCall(...)`) takes that method's params and gives its result type, and
 * results and messages are parsed with the contract's schemas as `useContract` parses them.
 * The wire names are the contract's.
 */
export function createHooks<K extends Contract>(contract: K): ContractHooks<K> {
  const subscriptions = contract.subscriptions ?? {};
  const hooks: Omit<ContractHooks<K>, 'api'> = {
    useCall: (name, ...[params, options = {}]) => {
      const spec = methodSpec(contract, name);
      const sent = params as Params | undefined;
      return useSharedCall(
        callKey(name, sent, spec, options.timeoutMs),
        (client, signal) =>
          client
            .call(name, sent, { signal, timeoutMs: options.timeoutMs })
            .then((result) => validateResult(spec, name, result)),
        options.enabled ?? true,
      ) as never;
    },
    useMutation: (name, options = {}) => {
      const spec = methodSpec(contract, name);
      return useMutationWith((client, params: unknown) =>
        client
          .call(name, params as Params | undefined, options)
          .then((result) => validateResult(spec, name, result)),
      ) as never;
    },
    useSubscription: (name, ...[params, options = {}]) => {
      const spec = specOfTopic(subscriptions, name);
      const schema = spec?.data;
      const parse = schema ? (data: unknown) => validateMessage(schema, name, data) : undefined;
      return useSharedSubscription(name, params, options, parse, schema) as never;
    },
  };
  const call = hooks.useCall as (name: string, ...args: unknown[]) => unknown;
  const mutation = hooks.useMutation as (name: string, options?: unknown) => unknown;
  // No prototype: a method named "__proto__" is a key like any other.
  const byName = Object.create(null) as Record<string, object>;
  for (const name of Object.keys(contract.methods)) {
    byName[name] = {
      useCall: (...args: unknown[]) => call(name, ...args),
      useMutation: (options?: unknown) => mutation(name, options),
    };
  }
  return { ...hooks, api: nestNames(byName) as ContractHooks<K>['api'] };
}

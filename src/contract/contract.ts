import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { JsonOnlyContract } from './json-only.js';
import { objectMembers } from './json-schema.js';

/** Any Standard Schema (zod 4, valibot, arktype...). */
export type Schema = StandardSchemaV1;

/** One method: its params and result schemas, and how positional params map onto named ones. */
export interface MethodSpec {
  /** Schema of the params: an object for named params, a tuple or array for positional ones. */
  params?: Schema;
  /**
   * For an object `params` schema: the order of its members when the caller sends them by
   * position, so `[42, 23]` and `{"minuend": 42, "subtrahend": 23}` both reach the handler as the object.
   */
  paramOrder?: readonly string[];
  result?: Schema;
  description?: string;
}

export interface NotificationSpec {
  params?: Schema;
  paramOrder?: readonly string[];
  description?: string;
}

/** A subscription: a topic (no handler on the server) or a per-subscriber stream. */
export interface SubscriptionSpec {
  /** Params of a per-subscriber stream. */
  params?: Schema;
  /** Each message's payload. */
  data?: Schema;
  description?: string;
}

/** A service defined once: both ends' types, server-side validation, and the OpenRPC document come from it. */
export interface Contract {
  name: string;
  version: string;
  description?: string;
  /** Methods the server implements. */
  methods: Record<string, MethodSpec>;
  /** Notifications the server sends to clients. */
  notifications?: Record<string, NotificationSpec>;
  /** Methods the client implements and the server calls. */
  clientMethods?: Record<string, MethodSpec>;
  subscriptions?: Record<string, SubscriptionSpec>;
}

/** The member names a `paramOrder` may use: the keys of the params' input type when it is an object. */
type MemberNames<T> = T extends readonly unknown[]
  ? string
  : T extends object
    ? keyof T & string
    : never;
// A tuple or array schema is positional already: no name fits it.
type ParamNames<S> = [InputOf<S>] extends [readonly unknown[]]
  ? never
  : [MemberNames<InputOf<S>>] extends [never]
    ? string
    : MemberNames<InputOf<S>>;
type CheckedOrder<M> = M extends { params: infer S; paramOrder: readonly unknown[] }
  ? { paramOrder: readonly ParamNames<S>[] }
  : unknown;
type CheckedSpecs<T> = { [K in keyof T]: CheckedOrder<T[K]> };
type CheckedGroup<C, G extends string> = C extends { [K in G]: infer T }
  ? { [K in G]: CheckedSpecs<T> }
  : unknown;
/**
 * A contract whose `paramOrder` lists name members of their params schemas (`['minuendd']` is
 * an error, as is any list on a tuple schema), and whose schemas' input types, what goes over the wire, are JSON (see
 * `JsonOnlyContract`).
 */
export type CheckedContract<C> = CheckedGroup<C, 'methods'> &
  CheckedGroup<C, 'notifications'> &
  CheckedGroup<C, 'clientMethods'> &
  JsonOnlyContract<C>;

/**
 * Throws when a `paramOrder` cannot be what positional calls go by: it names a member twice, or
 * one its params schema does not have; it leaves out a required member (no positional call could
 * give it); or the params schema is a tuple (positional already: its positions would be mapped
 * onto names it does not take). Checked where the schema's JSON Schema says what it is; a schema
 * without one, or one that is neither an object nor a tuple (a union, a record), is taken on trust.
 */
export function assertContract(contract: Contract): void {
  const groups = {
    method: contract.methods,
    notification: contract.notifications,
    'client method': contract.clientMethods,
  };
  for (const [kind, specs] of Object.entries(groups)) {
    for (const [name, spec] of Object.entries(specs ?? {})) {
      const problem = spec.paramOrder && paramOrderProblem(spec.paramOrder, spec.params);
      if (problem) throw new Error(`The paramOrder of ${kind} "${name}" ${problem}`);
    }
  }
}

const quoted = (names: readonly string[]): string => names.map((m) => `"${m}"`).join(', ');

/** What is wrong with `order` as the positions of `params`' members, or undefined. */
function paramOrderProblem(
  order: readonly string[],
  params: Schema | undefined,
): string | undefined {
  if (!params) return 'has no params schema to map positions onto';
  const twice = order.filter((member, i) => order.indexOf(member) !== i);
  if (twice.length > 0) return `lists ${quoted([...new Set(twice)])} more than once`;
  const members = objectMembers(params);
  if (members === 'tuple') return 'is on a tuple params schema, which is positional already';
  if (members === undefined) return undefined;
  const unknown = order.filter((member) => !members.names.includes(member));
  if (unknown.length > 0) {
    return `names ${quoted(unknown)}, not a member of its params (${quoted(members.names)})`;
  }
  const missing = members.required.filter((member) => !order.includes(member));
  if (missing.length > 0) {
    return `leaves out required ${quoted(missing)}: no call by position could give it`;
  }
  return undefined;
}

/**
 * Declare a contract; returns it as is, with its literal types kept for inference.
 * A `paramOrder` naming a member its params schema does not have is a compile error
 * and throws here, as does one positional calls could not go by (see `assertContract`).
 */
export function defineContract<const C extends Contract>(contract: C & CheckedContract<C>): C {
  assertContract(contract);
  return contract;
}

type InputOf<S> = S extends StandardSchemaV1 ? StandardSchemaV1.InferInput<S> : undefined;
type OutputOf<S> = S extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<S> : undefined;
type IsOptional<T, K> = K extends keyof T ? (object extends Pick<T, K> ? true : false) : true;
// An optional member given by position is given: `undefined` would go as `null`, which its
// schema refuses (leaving it out is done by ending the array before it).
type Get<T, K> = K extends keyof T
  ? IsOptional<T, K> extends true
    ? Exclude<T[K], undefined>
    : T[K]
  : undefined;
type Values<T, O extends readonly unknown[]> = { -readonly [I in keyof O]: Get<T, O[I]> };
/** The members of `T` as a tuple in `paramOrder` order; trailing optional members may be left out. */
type ByPosition<T, O extends readonly unknown[]> = O extends readonly [...infer Init, infer Last]
  ? IsOptional<T, Last> extends true
    ? ByPosition<T, Init> | [...Values<T, Init>, Get<T, Last>]
    : [...Values<T, Init>, Get<T, Last>]
  : [];
type Positional<M, In> = M extends { paramOrder: infer O extends readonly string[] }
  ? ByPosition<In, O>
  : never;

/** What a caller may send: the schema's input type, or (with paramOrder) the same values by position. */
export type CallParams<M> = M extends { params: infer S }
  ? InputOf<S> | Positional<M, InputOf<S>>
  : undefined;
/** What a handler receives: the schema's output type (after validation, positional params mapped to names). */
export type HandlerParams<M> = M extends { params: infer S } ? OutputOf<S> : undefined;
/** What a handler returns. */
export type HandlerResult<M> = M extends { result: infer S } ? InputOf<S> : unknown;
/** What a caller gets back. */
export type CallResult<M> = M extends { result: infer S } ? OutputOf<S> : unknown;
/** A subscription's message payload, as subscribers get it (the data schema's output). */
export type SubscriptionData<M> = M extends { data: infer S } ? OutputOf<S> : unknown;
/** A subscription's message payload, as the server publishes it (the data schema's input). */
export type PublishData<M> = M extends { data: infer S } ? InputOf<S> : unknown;
/** A stream's params as the client sends them. */
export type SubscriptionParams<M> = M extends { params: infer S } ? InputOf<S> : undefined;

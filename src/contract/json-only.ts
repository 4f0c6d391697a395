import type { StandardSchemaV1 } from '@standard-schema/spec';

/*
 * Contracts are JSON-only: what travels is the schemas' input type (the caller's params, the
 * handler's result, the published or streamed data), written with JSON.stringify and read by
 * peers that may not be TypeScript at all (the CLI, curl, a Python backend). A Date would
 * arrive as a string, a Map as {}, a bigint would not be sent at all; so an input type holding
 * one is a compile error naming the member. Output types are free: a transform or codec
 * (`z.iso.datetime().transform((s) => new Date(s))`) runs after the JSON has been read.
 */

/** Values JSON carries as they are (`undefined` members are left out, as optional ones are). */
type JsonPrimitive = string | number | boolean | null | undefined | void;

/** Where in the value: `''` for the value itself, then `.member`, `[i]`, `[key]`. */
type At<Path extends string> = Path extends '' ? '' : ` at ${Path}`;

/** The message for `what` found at `Path`. */
type NotJson<
  What extends string,
  Path extends string,
  Hint extends string,
> = `${What}${At<Path>} is not JSON; ${Hint}`;

type MemberPath<Path extends string, K> = K extends string
  ? string extends K
    ? `${Path}[key]`
    : `${Path}.${K}`
  : K extends number
    ? `${Path}[i]`
    : `${Path}[symbol]`;

/** Levels left to look into (recursive schemas stop here rather than recurse without end). */
type Fewer = [never, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9];

/** The message for a type JSON cannot carry at all (a Date, a Map, ...); `never` for any other. */
type LeafProblem<T, Path extends string> = T extends Date
  ? NotJson<'Date', Path, 'use z.iso.datetime() (an ISO 8601 string)'>
  : T extends bigint
    ? NotJson<'bigint', Path, 'use a decimal string'>
    : T extends ReadonlyMap<unknown, unknown>
      ? NotJson<'Map', Path, 'use z.record() or an array of [key, value] pairs'>
      : T extends ReadonlySet<unknown>
        ? NotJson<'Set', Path, 'use an array'>
        : T extends ArrayBuffer | ArrayBufferView
          ? NotJson<'binary data', Path, 'use a base64 string'>
          : T extends symbol
            ? NotJson<'symbol', Path, 'use a string'>
            : T extends (...args: never[]) => unknown
              ? NotJson<'a function', Path, 'send data, not behaviour'>
              : never;

/** The problems inside an array's items or an object's members. */
type InnerProblem<T, Path extends string, Depth extends number> = T extends readonly (infer Item)[]
  ? JsonProblem<Item, `${Path}[i]`, Fewer[Depth]>
  : { [K in keyof T]-?: JsonProblem<T[K], MemberPath<Path, K>, Fewer[Depth]> }[keyof T];

/**
 * Why a value of type `T` does not survive JSON.stringify and JSON.parse, as a message naming
 * where (a union of messages when several members fail); `never` when it does. `any` and
 * `unknown` are taken on trust (the run-time check in debug mode covers them). A class
 * instance fails on its methods (`a function at .length`).
 */
export type JsonProblem<T, Path extends string = '', Depth extends number = 10> = [Depth] extends [
  never,
]
  ? never
  : 0 extends 1 & T
    ? never
    : unknown extends T
      ? never
      : T extends JsonPrimitive
        ? never
        : [LeafProblem<T, Path>] extends [never]
          ? InnerProblem<T, Path, Depth>
          : LeafProblem<T, Path>;

/** The problem with a schema's input type, prefixed with what it describes; `never` when none. */
type SchemaProblem<S, What extends string> = S extends StandardSchemaV1
  ? JsonProblem<StandardSchemaV1.InferInput<S>> extends infer P extends string
    ? [P] extends [never]
      ? never
      : `${What}: ${P}`
    : never
  : never;

/** `{ [field]: message }` when the schema in `field` has a non-JSON input type, else unknown. */
type CheckedField<Spec, Field extends string, What extends string> = Spec extends {
  [F in Field]: infer S;
}
  ? [SchemaProblem<S, What>] extends [never]
    ? unknown
    : { [F in Field]: SchemaProblem<S, What> }
  : unknown;

/** Each spec of a group checked in its schema fields (`First`, and `Second` when given). */
type CheckedSpecs<T, First extends string, Second extends string> = {
  [K in keyof T]: CheckedField<T[K], First, `${First} of ${K & string}`> &
    ([Second] extends [never] ? unknown : CheckedField<T[K], Second, `${Second} of ${K & string}`>);
};

type CheckedGroup<
  C,
  G extends string,
  First extends string,
  Second extends string = never,
> = C extends { [K in G]: infer T } ? { [K in G]: CheckedSpecs<T, First, Second> } : unknown;

/**
 * A contract whose schemas all have JSON input types: where one does not, that schema's type
 * becomes the message (`"result of getUser: Date at .createdAt is not JSON; use z.iso.datetime()
 * (an ISO 8601 string)"`), so the compiler shows it as the type the schema is not assignable to.
 */
export type JsonOnlyContract<C> = CheckedGroup<C, 'methods', 'params', 'result'> &
  CheckedGroup<C, 'notifications', 'params'> &
  CheckedGroup<C, 'clientMethods', 'params', 'result'> &
  CheckedGroup<C, 'subscriptions', 'params', 'data'>;

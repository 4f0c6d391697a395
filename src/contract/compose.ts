import { assertContract } from './contract.js';
import type { Contract } from './contract.js';

/*
 * A contract composed of smaller ones (routers): each route's names prefixed with its key and
 * a dot (`chat` + `send` is `chat.send`), further contracts taken as they are. The composed
 * names are the wire names; the nested API (`api.chat.send`) follows from the dots.
 */

/** What the composed contract says about itself (its OpenRPC `info`). */
export interface ContractInfo {
  name: string;
  version: string;
  description?: string;
}

type Group = 'methods' | 'notifications' | 'clientMethods' | 'subscriptions';

/** A group of a contract's specs; `{}` when it has none. */
type GroupOf<C, G extends Group> = G extends keyof C ? NonNullable<C[G]> : Record<never, never>;

type Prefixed<P extends string, S> = { [K in keyof S & string as `${P}.${K}`]: S[K] };

type UnionToIntersection<U> = (U extends unknown ? (x: U) => void : never) extends (
  x: infer I,
) => void
  ? I
  : never;

type Flatten<T> = { [K in keyof T]: T[K] };

/** One group of the composed contract: every route's specs prefixed, and the contracts' as they are. */
type MergedGroup<R, U extends readonly Contract[], G extends Group> = Flatten<
  UnionToIntersection<
    | { [P in keyof R & string]: Prefixed<P, GroupOf<R[P], G>> }[keyof R & string]
    | GroupOf<U[number], G>
  >
>;

/** The contract `mergeContracts(info, routes, ...contracts)` returns. */
export interface MergedContract<R, U extends readonly Contract[]> extends ContractInfo {
  methods: MergedGroup<R, U, 'methods'>;
  notifications: MergedGroup<R, U, 'notifications'>;
  clientMethods: MergedGroup<R, U, 'clientMethods'>;
  subscriptions: MergedGroup<R, U, 'subscriptions'>;
}

/** A group's names, when they are known (a contract typed only as `Contract` has any). */
type NamesOf<S> = string extends keyof S ? never : keyof S & string;

/** Each part's names in a group, under a key of its own (routes only when their keys are known). */
type PartNames<R, U, G extends Group> = {
  [P in NamesOf<R> as `route ${P}`]: `${P}.${NamesOf<GroupOf<R[P], G>>}`;
} & { [I in keyof U & `${number}` as `contract ${I}`]: NamesOf<GroupOf<U[I], G>> };

/** The names more than one part has. */
type Twice<N> = { [K in keyof N]: N[K] & N[Exclude<keyof N, K>] }[keyof N];

type Duplicates<R, U> =
  | `method ${Twice<PartNames<R, U, 'methods'>> & string} is defined twice`
  | `notification ${Twice<PartNames<R, U, 'notifications'>> & string} is defined twice`
  | `client method ${Twice<PartNames<R, U, 'clientMethods'>> & string} is defined twice`
  | `subscription ${Twice<PartNames<R, U, 'subscriptions'>> & string} is defined twice`;

/** `unknown` when no name comes from two parts; else the message, which the routes are not. */
export type DistinctNames<R, U> = [Duplicates<R, U>] extends [never] ? unknown : Duplicates<R, U>;

const groups: readonly (readonly [Group, string])[] = [
  ['methods', 'method'],
  ['notifications', 'notification'],
  ['clientMethods', 'client method'],
  ['subscriptions', 'subscription'],
];

/** A route key: dot-separated names, none empty, no `*` (it would read as a wildcard topic). */
const routeKey = /^[^.*]+(?:\.[^.*]+)*$/;

/**
 * Compose a contract from smaller ones. Each of `routes` has its names prefixed with its key
 * and a dot (`{ chat: chatContract }`: `send` becomes `chat.send`, the topic `room.*` becomes
 * `chat.room.*`), in every group: methods, notifications, client methods and subscriptions.
 * `contracts` join as they are. A name two parts both define is a compile error where their
 * names are known, and throws here always; so does a route key that is empty, has an empty
 * segment or a `*`, or is `rpc` (names starting with `rpc.` are reserved).
 */
export function mergeContracts<
  const R extends Record<string, Contract>,
  const U extends readonly Contract[],
>(info: ContractInfo, routes: R & DistinctNames<R, U>, ...contracts: U): MergedContract<R, U> {
  const merged: Contract & Record<Group, Record<string, unknown>> = {
    ...info,
    methods: {},
    notifications: {},
    clientMethods: {},
    subscriptions: {},
  };
  const origins = new Map<string, string>();
  const add = (contract: Contract, prefix: string, from: string): void => {
    for (const [group, kind] of groups) {
      for (const [name, spec] of Object.entries(contract[group] ?? {})) {
        const full = prefix + name;
        const seen = origins.get(`${group} ${full}`);
        if (seen !== undefined) {
          throw new Error(`The ${kind} "${full}" is defined twice: by ${seen} and by ${from}`);
        }
        origins.set(`${group} ${full}`, from);
        // defineProperty: a name such as "__proto__" is a spec like any other.
        Object.defineProperty(merged[group], full, {
          value: spec,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
    }
  };
  for (const [key, contract] of Object.entries(routes as Record<string, Contract>)) {
    if (!routeKey.test(key) || key === 'rpc' || key.startsWith('rpc.')) {
      throw new Error(
        routeKey.test(key)
          ? `The route "${key}" is reserved: names starting with "rpc." belong to the protocol`
          : `The route "${key}" is not a prefix: dot-separated names, none empty, without "*"`,
      );
    }
    add(contract, `${key}.`, `route "${key}" (contract "${contract.name}")`);
  }
  contracts.forEach((contract, i) => add(contract, '', `contract ${i + 1} ("${contract.name}")`));
  assertContract(merged);
  return merged as unknown as MergedContract<R, U>;
}

/*
 * A contract's subscriptions are named as the gateway declares topics: an exact name
 * (`prices`), or a prefix ending in `*` (`room.*`) that stands for every name starting with
 * the prefix (`room.lobby`). Publishing and subscribing use the concrete names.
 */

/** The names a subscription key stands for: `room.*` is `` `room.${string}` ``, others themselves. */
export type TopicName<Key> = Key extends `${infer Prefix}*` ? `${Prefix}${string}` : Key;

/** Every name the subscriptions `S` can be published or subscribed under. */
export type TopicNames<S> = { [Key in keyof S & string]: TopicName<Key> }[keyof S & string];

/**
 * The spec of the subscription a concrete name belongs to: its exact key, or else the
 * wildcard keys whose prefix it starts with (several at once type as their union; at run
 * time the longest prefix wins, as the gateway resolves topics).
 */
export type SpecOfTopic<S, Name extends string> = Name extends keyof S
  ? S[Name]
  : { [Key in keyof S & string]: Name extends TopicName<Key> ? S[Key] : never }[keyof S & string];

/** A per-subscriber stream has one exact name: a wildcard key can only be a topic. */
export type StreamKeys<S> = { [Key in keyof S]: Key extends `${string}*` ? never : Key }[keyof S];

/** The spec `name` belongs to, exact key first, then the longest wildcard prefix; undefined if none. */
export function specOfTopic<T>(specs: Record<string, T>, name: string): T | undefined {
  if (Object.hasOwn(specs, name)) return specs[name];
  let found: T | undefined;
  let longest = -1;
  for (const [key, spec] of Object.entries(specs)) {
    if (!key.endsWith('*')) continue;
    const prefix = key.slice(0, -1);
    if (prefix.length > longest && name.startsWith(prefix)) {
      found = spec;
      longest = prefix.length;
    }
  }
  return found;
}

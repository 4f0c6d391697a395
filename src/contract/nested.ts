/*
 * A contract's names are dotted paths (`chat.send`, `chat.room.join`). The typed API offers
 * each one under its full name and as nested members (`api['chat.send']` and `api.chat.send`),
 * and implementations may nest their handlers the same way (`{ chat: { send } }`). The wire
 * always carries the full name. A name that is also a prefix (`chat` beside `chat.send`) is
 * its function with the members under it added: `api.chat()` and `api.chat.send()`.
 */

type Dotted = `${string}.${string}`;

/** The first segments of the dotted names among `K`: `chat` for `chat.send`. */
type HeadOf<K> = K extends `${infer Head}.${string}` ? Head : never;

/** The entries of `F` under `Head`, named by the rest: `{ send }` from `{ 'chat.send' }` under `chat`. */
type Under<F, Head extends string> = {
  [K in keyof F & string as K extends `${Head}.${infer Rest}` ? Rest : never]: F[K];
};

/** One level below the top: a member per first segment, nothing by a dotted name. */
type Segments<F> = {
  readonly [K in keyof F as K extends Dotted ? never : K]: F[K] &
    (K extends HeadOf<keyof F> ? Segments<Under<F, K>> : unknown);
} & { readonly [H in Exclude<HeadOf<keyof F>, keyof F>]: Segments<Under<F, H>> };

/**
 * `F` (entries by full name) with its dotted names also as nested members: `chat.send` is
 * `['chat.send']` and `.chat.send`, at any depth.
 */
export type Nested<F> = {
  readonly [K in keyof F]: F[K] & (K extends HeadOf<keyof F> ? Segments<Under<F, K>> : unknown);
} & { readonly [H in Exclude<HeadOf<keyof F>, keyof F>]: Segments<Under<F, H>> };

/** A level of handlers nested by first segment; each level below may be either form again. */
type HandlerSegments<F> = {
  [K in keyof F as K extends Dotted ? never : K]: F[K] &
    (K extends HeadOf<keyof F> ? NestedHandlers<Under<F, K>> : unknown);
} & { [H in Exclude<HeadOf<keyof F>, keyof F>]: NestedHandlers<Under<F, H>> };

/**
 * Handlers `F` by full name (`{ 'chat.send': f }`), or nested by first segment (`{ chat: { send:
 * f } }`, whose own level may again be by full name: `{ chat: { 'room.join': g } }`). A name that
 * is also a prefix is its handler with the handlers under it as members (`Object.assign`).
 */
export type NestedHandlers<F> = [HeadOf<keyof F>] extends [never] ? F : F | HandlerSegments<F>;

type Entry = Record<string, unknown>;

/**
 * The functions of `flat` (by full name) also as nested members, as `Nested` types them.
 * Built once, when a contract is bound (a call is then a plain function call): a prefix is a
 * null-prototype object (so no name is shadowed by, or lands on, `Object.prototype`), or the
 * function of the same name.
 */
export function nestNames(flat: Record<string, object>): Entry {
  const root = Object.create(null) as Entry;
  const put = (node: Entry, key: string, value: unknown): void => {
    // defineProperty: a function's own `name` and `length` are not writable.
    Object.defineProperty(node, key, { value, enumerable: true });
  };
  for (const name of Object.keys(flat)) put(root, name, flat[name]);
  for (const name of Object.keys(flat)) {
    if (!name.includes('.')) continue;
    const segments = name.split('.');
    let node = root;
    segments.forEach((segment, i) => {
      // Enumerable: a function's own `name` and `length` are not, and give way to a segment.
      if (!Object.prototype.propertyIsEnumerable.call(node, segment)) {
        const path = segments.slice(0, i + 1).join('.');
        put(node, segment, Object.hasOwn(flat, path) ? flat[path] : Object.create(null));
      }
      node = node[segment] as Entry;
    });
  }
  return root;
}

/** What every object or function has: never taken for a handler or a level of handlers. */
function inherited(key: string, value: unknown): boolean {
  return (
    value === (Object.prototype as Entry)[key] ||
    value === (Function.prototype as unknown as Entry)[key]
  );
}

type AnyHandler = (...args: never[]) => unknown;

/**
 * The handler of `name` in `handlers` (`NestedHandlers`): under its full name, or nested under
 * its first segment, level by level. Given both ways is an error: which one was meant?
 */
export function findHandler(handlers: object, name: string): AnyHandler | undefined {
  const node = handlers as Entry;
  const direct = node[name];
  const byName = typeof direct === 'function' && !inherited(name, direct) ? direct : undefined;
  const dot = name.indexOf('.');
  if (dot < 0) return byName as AnyHandler | undefined;
  const head = name.slice(0, dot);
  const level = node[head];
  const nested =
    level !== null &&
    (typeof level === 'object' || typeof level === 'function') &&
    !inherited(head, level)
      ? findHandler(level, name.slice(dot + 1))
      : undefined;
  if (byName && nested) {
    throw new Error(`"${name}" has two handlers: one under its full name, one nested`);
  }
  return (byName ?? nested) as AnyHandler | undefined;
}

/**
 * The paths in `handlers` that are neither a name of `names` nor a prefix of one, as full
 * names (`chat.sned`): handlers that nothing would ever call.
 */
export function strayHandlers(handlers: object, names: readonly string[], prefix = ''): string[] {
  const stray: string[] = [];
  for (const key of Object.keys(handlers)) {
    const path = prefix + key;
    const value = (handlers as Entry)[key];
    const isName = names.includes(path);
    const isPrefix = names.some((name) => name.startsWith(`${path}.`));
    if (!isName && !isPrefix) stray.push(path);
    else if (
      isPrefix &&
      value !== null &&
      (typeof value === 'object' || typeof value === 'function')
    ) {
      stray.push(...strayHandlers(value, names, `${path}.`));
    }
  }
  return stray;
}

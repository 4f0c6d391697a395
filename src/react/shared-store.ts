// What the hooks read through useSyncExternalStore: one store per client and key (a call's
// method and params, a subscription's topic and params), shared by every component showing
// it. The first component that subscribes starts it; the last one's leaving stops it one
// macrotask later, so StrictMode's unmount and remount of the same component in one commit
// keeps the call or the wire subscription it already made instead of making a second one.
import type { RpcClient } from '../client/client.js';

/** A snapshot that stays the same object until something in it changes, and who to tell. */
export abstract class SharedStore<S> {
  readonly #listeners = new Set<() => void>();
  #held = false;
  #releasing: ReturnType<typeof setTimeout> | undefined;
  /** Called once the store is stopped: it leaves the registry. */
  forget: () => void = () => undefined;

  constructor(protected snapshot: S) {}

  /** useSyncExternalStore's getSnapshot. */
  readonly get = (): S => this.snapshot;

  /** Whether a component holds it (or held it less than a macrotask ago). */
  get held(): boolean {
    return this.#held;
  }

  /** useSyncExternalStore's subscribe: the first listener starts the store. */
  readonly subscribe = (listener: () => void): (() => void) => {
    this.#listeners.add(listener);
    clearTimeout(this.#releasing);
    this.#releasing = undefined;
    if (!this.#held) {
      this.#held = true;
      this.start();
    }
    return () => {
      this.#listeners.delete(listener);
      if (this.#listeners.size > 0 || this.#releasing !== undefined) return;
      this.#releasing = setTimeout(() => {
        this.#releasing = undefined;
        if (this.#listeners.size > 0) return;
        this.#held = false;
        this.stop();
        this.forget();
      }, 0);
    };
  };

  protected set(next: S): void {
    this.snapshot = next;
    for (const listener of [...this.#listeners]) listener();
  }

  /** The first holder came: call, or subscribe. */
  protected abstract start(): void;
  /** The last holder left: abort the call, or unsubscribe. */
  protected abstract stop(): void;
}

const registries = new WeakMap<RpcClient, Map<string, SharedStore<unknown>>>();

/**
 * The client's store for `key`, made by `make` when there is none. Called while rendering, so
 * making one starts nothing; a store made by a render that never commits is dropped a
 * macrotask later unless a component subscribed to it by then.
 */
export function storeFor<T extends SharedStore<unknown>>(
  client: RpcClient,
  key: string,
  make: () => T,
): T {
  let stores = registries.get(client);
  if (!stores) registries.set(client, (stores = new Map<string, SharedStore<unknown>>()));
  const found = stores.get(key);
  if (found) return found as T;
  const made = make();
  const all = stores;
  made.forget = () => {
    if (all.get(key) === made) all.delete(key);
  };
  all.set(key, made);
  setTimeout(() => {
    if (!made.held) made.forget();
  }, 0);
  return made;
}

const ids = new WeakMap<object, number>();
let lastId = 0;

/** A number per object (a contract's spec), so that keys made with different specs differ. */
export function idOf(object: object | undefined): number {
  if (!object) return 0;
  let id = ids.get(object);
  if (id === undefined) ids.set(object, (id = ++lastId));
  return id;
}

/** The key of a CompactMap that holds no lone entry: no key a caller has can be it. */
const NONE: unique symbol = Symbol('none');

/**
 * A Map for a collection that most of the time holds one entry: a connection's subscriptions
 * (most connections have one). A Map costs about 184 bytes even with a single entry (its hash
 * table is made for several); this keeps a lone entry in two fields of its own, and makes a Map
 * only for a second one (kept from then on, until the collection is empty again). It behaves as
 * a Map for what the gateway asks of it: insertion order, `set` replacing the value of a key it
 * has, keys compared as a Map compares them, and iteration over entries (over a snapshot while
 * the entry is inline).
 */
export class CompactMap<K, V> {
  #map: Map<K, V> | undefined = undefined;
  /** The lone entry while there is no Map (NONE: there is none). */
  #key: K | typeof NONE = NONE;
  #value: V | undefined = undefined;

  get size(): number {
    return this.#map ? this.#map.size : this.#key === NONE ? 0 : 1;
  }

  get(key: K): V | undefined {
    if (this.#map) return this.#map.get(key);
    return this.#key !== NONE && sameKey(this.#key, key) ? this.#value : undefined;
  }

  has(key: K): boolean {
    if (this.#map) return this.#map.has(key);
    return this.#key !== NONE && sameKey(this.#key, key);
  }

  set(key: K, value: V): this {
    if (this.#map) {
      this.#map.set(key, value);
    } else if (this.#key === NONE || sameKey(this.#key, key)) {
      // As a Map keeps it: -0 as 0.
      this.#key = (key === 0 ? 0 : key) as K;
      this.#value = value;
    } else {
      // A second key: a Map from here on, the first entry first.
      this.#map = new Map([[this.#key, this.#value as V]]).set(key, value);
      this.#key = NONE;
      this.#value = undefined;
    }
    return this;
  }

  delete(key: K): boolean {
    const map = this.#map;
    if (map) {
      const deleted = map.delete(key);
      // Empty again: the next entry is kept inline. (Not on the way down to one, so that the
      // entries of a Map being iterated stay in it; an iteration under way when the last one
      // goes does not see entries set after it.)
      if (map.size === 0) this.#map = undefined;
      return deleted;
    }
    if (this.#key === NONE || !sameKey(this.#key, key)) return false;
    this.#key = NONE;
    this.#value = undefined;
    return true;
  }

  clear(): void {
    this.#map = undefined;
    this.#key = NONE;
    this.#value = undefined;
  }

  values(): IterableIterator<V> {
    if (this.#map) return this.#map.values();
    return (this.#key === NONE ? [] : [this.#value as V]).values();
  }

  entries(): IterableIterator<[K, V]> {
    if (this.#map) return this.#map.entries();
    const key = this.#key;
    return (key === NONE ? [] : [[key, this.#value as V] as [K, V]]).values();
  }

  [Symbol.iterator](): IterableIterator<[K, V]> {
    return this.entries();
  }
}

/** Keys compared as a Map compares them (SameValueZero: NaN equals NaN, 0 equals -0). */
function sameKey(a: unknown, b: unknown): boolean {
  return a === b || (a !== a && b !== b);
}

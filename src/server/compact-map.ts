/**
 * A Map for a collection that most of the time holds one entry: a connection's subscriptions
 * (most connections have one). A Map costs about 184 bytes even with a single entry (its hash
 * table is made for several); this keeps a lone entry in two fields of its own, and makes a Map
 * only for a second one (kept from then on, until the collection is empty again). It behaves as
 * a Map for what the gateway asks of it: insertion order, `set` replacing the value of a key it
 * has, and iteration over entries (over a snapshot while the entry is inline).
 */
export class CompactMap<K, V> {
  #map: Map<K, V> | undefined = undefined;
  /** The lone entry while there is no Map; `#single` says whether there is one. */
  #key: K | undefined = undefined;
  #value: V | undefined = undefined;
  #single = false;

  get size(): number {
    return this.#map ? this.#map.size : this.#single ? 1 : 0;
  }

  get(key: K): V | undefined {
    if (this.#map) return this.#map.get(key);
    return this.#single && sameKey(this.#key, key) ? this.#value : undefined;
  }

  has(key: K): boolean {
    if (this.#map) return this.#map.has(key);
    return this.#single && sameKey(this.#key, key);
  }

  set(key: K, value: V): this {
    if (this.#map) {
      this.#map.set(key, value);
    } else if (!this.#single || sameKey(this.#key, key)) {
      // As a Map keeps it: -0 as 0.
      this.#key = (key === 0 ? 0 : key) as K;
      this.#value = value;
      this.#single = true;
    } else {
      // A second key: a Map from here on, the first entry first.
      this.#map = new Map([[this.#key as K, this.#value as V]]).set(key, value);
      this.clearSingle();
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
    if (!this.#single || !sameKey(this.#key, key)) return false;
    this.clearSingle();
    return true;
  }

  clear(): void {
    this.#map = undefined;
    this.clearSingle();
  }

  values(): IterableIterator<V> {
    if (this.#map) return this.#map.values();
    return (this.#single ? [this.#value as V] : []).values();
  }

  entries(): IterableIterator<[K, V]> {
    if (this.#map) return this.#map.entries();
    return (this.#single ? [[this.#key as K, this.#value as V] as [K, V]] : []).values();
  }

  [Symbol.iterator](): IterableIterator<[K, V]> {
    return this.entries();
  }

  // Not a `#` method: those add a field to every instance.
  private clearSingle(): void {
    this.#key = undefined;
    this.#value = undefined;
    this.#single = false;
  }
}

/** Keys compared as a Map compares them (SameValueZero: NaN equals NaN, 0 equals -0). */
function sameKey(a: unknown, b: unknown): boolean {
  return a === b || (a !== a && b !== b);
}

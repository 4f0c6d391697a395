/**
 * A first-in first-out queue on a ring that doubles when full: `push` and `shift` are O(1)
 * however long it is (an array's `shift` moves every element), and it keeps its order through
 * `retain`, which drops in place. Backs a subscription's replay backlog and its passed-by seqs,
 * which may each hold thousands of entries.
 */
export class Fifo<T> {
  private items: (T | undefined)[];
  /** `items.length - 1`; the length is a power of two. */
  private mask: number;
  private head = 0;
  private count = 0;

  constructor(initialCapacity = 8) {
    let capacity = 2;
    while (capacity < initialCapacity) capacity *= 2;
    this.items = new Array<T | undefined>(capacity);
    this.mask = capacity - 1;
  }

  get length(): number {
    return this.count;
  }

  push(item: T): void {
    if (this.count === this.items.length) this.grow();
    this.items[(this.head + this.count) & this.mask] = item;
    this.count++;
  }

  /** The oldest item, removed; undefined when empty. */
  shift(): T | undefined {
    if (this.count === 0) return undefined;
    const item = this.items[this.head];
    this.items[this.head] = undefined;
    this.head = (this.head + 1) & this.mask;
    this.count--;
    return item;
  }

  /** The oldest item, left in place; undefined when empty. */
  peek(): T | undefined {
    return this.count === 0 ? undefined : this.items[this.head];
  }

  /** Keep only the items `keep` accepts, in their order (one pass, no copy). */
  retain(keep: (item: T) => boolean): void {
    let kept = 0;
    for (let i = 0; i < this.count; i++) {
      const item = this.items[(this.head + i) & this.mask] as T;
      if (keep(item)) this.items[(this.head + kept++) & this.mask] = item;
    }
    for (let i = kept; i < this.count; i++) this.items[(this.head + i) & this.mask] = undefined;
    this.count = kept;
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (let i = 0; i < this.count; i++) yield this.items[(this.head + i) & this.mask] as T;
  }

  private grow(): void {
    const items = new Array<T | undefined>(this.items.length * 2);
    for (let i = 0; i < this.count; i++) items[i] = this.items[(this.head + i) & this.mask];
    this.items = items;
    this.mask = items.length - 1;
    this.head = 0;
  }
}

/**
 * The idempotency keys MemoryBroker remembers (Broker.publishOnce): per topic and key, the seq
 * of the first publish, until its window ends. Bounded: beyond `maxKeys` the oldest key is
 * forgotten first (a retry of it after that would publish again), so distinct keys cannot grow
 * memory without end.
 */
export class OnceKeys {
  /** By `<topic>\n<key>`, in the order they were first seen (the oldest first). */
  private readonly keys = new Map<string, { seq: number; until: number }>();

  constructor(
    private readonly now: () => number,
    readonly maxKeys: number,
  ) {}

  get size(): number {
    return this.keys.size;
  }

  /** The seq of the first publish with this key while its window holds; undefined otherwise. */
  seen(topic: string, key: string): number | undefined {
    const id = `${topic}\n${key}`;
    const entry = this.keys.get(id);
    if (!entry) return undefined;
    if (entry.until > this.now()) return entry.seq;
    this.keys.delete(id);
    return undefined;
  }

  remember(topic: string, key: string, seq: number, windowMs: number): void {
    const now = this.now();
    // Lapsed keys at the head go first; then, while full, the oldest still held.
    for (const [id, entry] of this.keys) {
      if (entry.until > now && this.keys.size < this.maxKeys) break;
      this.keys.delete(id);
    }
    this.keys.set(`${topic}\n${key}`, { seq, until: now + windowMs });
  }

  clear(): void {
    this.keys.clear();
  }
}

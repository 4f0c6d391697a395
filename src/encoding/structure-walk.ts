/** Why a walk stopped: nested deeper than maxDepth, or more values than maxValues. */
export type WalkRefusal = 'depth' | 'values';

/**
 * The part of a structural check both binary encodings share: a stack of how many items each
 * open array or map still holds, and a count of the values read. No recursion (a frame nested
 * a million deep costs a bounded stack of at most `maxDepth` numbers) and no allocation per
 * item.
 *
 * Values are counted as JSON text is (safe-json.ts scanJson): each array, map and scalar one,
 * map keys none, so a frame passes `maxValues` exactly when its JSON text would. A key is a
 * string: the checks refuse anything else at a key (atKey) before it is read.
 */
export class StructureWalk {
  /**
   * Items still expected in each open container; the bottom slot is the top-level value. A
   * map's slot is negative, counting up to 0: its keys are the items read when it is even.
   */
  private readonly open: number[] = [1];
  private values = 0;

  constructor(
    private readonly maxDepth: number,
    private readonly maxValues = Infinity,
  ) {}

  get done(): boolean {
    return this.open.length === 0;
  }

  /** Whether the next item read is a map's key. */
  get atKey(): boolean {
    const left = this.open[this.open.length - 1]!;
    return left < 0 && left % 2 === 0;
  }

  /** One scalar was read. */
  scalar(): WalkRefusal | undefined {
    const key = this.take();
    this.closeFinished();
    return !key && ++this.values > this.maxValues ? 'values' : undefined;
  }

  /** An array of `items` items starts. */
  array(items: number): WalkRefusal | undefined {
    return this.container(items);
  }

  /** A map of `entries` key-value pairs starts. */
  map(entries: number): WalkRefusal | undefined {
    return this.container(-2 * entries);
  }

  /** A container of `slot` items (negative for a map's keys and values) starts. */
  private container(slot: number): WalkRefusal | undefined {
    this.take();
    // An array or map at this point sits one level below everything still open.
    if (this.open.length > this.maxDepth) return 'depth';
    if (++this.values > this.maxValues) return 'values';
    if (slot !== 0) this.open.push(slot);
    else this.closeFinished();
    return undefined;
  }

  /** Takes one item from the innermost open container; true when it is a map's key. */
  private take(): boolean {
    const open = this.open;
    const top = open.length - 1;
    const left = open[top]!;
    if (left > 0) {
      open[top] = left - 1;
      return false;
    }
    open[top] = left + 1;
    return left % 2 === 0;
  }

  /** Closes the containers whose last item was read. */
  private closeFinished(): void {
    const open = this.open;
    while (open.length > 0 && open[open.length - 1] === 0) open.pop();
  }
}

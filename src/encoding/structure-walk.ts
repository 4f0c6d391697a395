/**
 * The part of a structural check both binary encodings share: a stack of how many items each
 * open array or map still holds. No recursion (a frame nested a million deep costs a bounded
 * stack of at most `maxDepth` numbers) and no allocation per item.
 */
export class StructureWalk {
  /** Items still expected in each open container; the bottom slot is the top-level value. */
  private readonly open: number[] = [1];

  constructor(private readonly maxDepth: number) {}

  get done(): boolean {
    return this.open.length === 0;
  }

  /**
   * One value was read: a scalar (`items` undefined) or a container of `items` items. False
   * when it nests deeper than `maxDepth`.
   */
  value(items?: number): boolean {
    const open = this.open;
    open[open.length - 1]!--;
    if (items !== undefined) {
      // An array or map at this point sits one level below everything still open.
      if (open.length > this.maxDepth) return false;
      if (items > 0) open.push(items);
    }
    while (open.length > 0 && open[open.length - 1] === 0) open.pop();
    return true;
  }
}

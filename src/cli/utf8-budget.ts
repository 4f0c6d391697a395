/** UTF-8 takes at least 1 byte per UTF-16 code unit and at most 3 (4 per surrogate pair). */
const MAX_UTF8_PER_UNIT = 3;

/**
 * The UTF-8 bytes of the texts added, against `maxBytes`, each text measured only when its
 * length cannot decide: the length is a lower bound of the bytes and 3 times the length an
 * upper one. While the upper bound of all the texts not measured yet keeps within `maxBytes`,
 * they are held (as the strings they already are, together at most a third of `maxBytes` in
 * UTF-16 code units) rather than measured; once it does not, they are measured exactly, once
 * each, and let go.
 */
export class Utf8Budget {
  /** UTF-8 bytes of the texts measured. */
  private bytes = 0;
  /** The texts added and not measured yet, and their length in UTF-16 code units. */
  private unmeasured: string[] = [];
  private unmeasuredUnits = 0;
  private over = false;
  /**
   * UTF-16 code units measured so far (each text at most once); exposed so tests can say what
   * was measured without a clock.
   */
  measuredUnits = 0;

  constructor(readonly maxBytes: number) {}

  /** Add `text`; false once the texts added come to more than `maxBytes` of UTF-8. */
  add(text: string): boolean {
    if (this.over) return false;
    const units = this.unmeasuredUnits + text.length;
    if (this.bytes + units > this.maxBytes) {
      this.over = true;
      this.unmeasured = [];
    } else if (this.bytes + units * MAX_UTF8_PER_UNIT <= this.maxBytes) {
      this.unmeasured.push(text);
      this.unmeasuredUnits = units;
    } else {
      for (const held of this.unmeasured) this.measure(held);
      this.measure(text);
      this.unmeasured = [];
      this.unmeasuredUnits = 0;
      this.over = this.bytes > this.maxBytes;
    }
    return !this.over;
  }

  private measure(text: string): void {
    this.bytes += Buffer.byteLength(text, 'utf8');
    this.measuredUnits += text.length;
  }
}

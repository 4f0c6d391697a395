/**
 * Whether `text` has no lone surrogate: it has a UTF-8 form, so it can be a topic, a header value
 * (encodeURIComponent throws on one) or a broker's key as itself. String.prototype.isWellFormed,
 * which Node 20 has and the ES2022 types lack.
 */
export function isWellFormed(text: string): boolean {
  return (text as unknown as { isWellFormed(): boolean }).isWellFormed();
}

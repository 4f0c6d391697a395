/**
 * Whether the big-endian IEEE 754 float of `size` bytes (2, 4 or 8) at `at` is NaN or an
 * infinity: its exponent bits all set. JSON has no such number, and JSON.stringify writes one as
 * null, so a binary frame carrying one (an id of NaN answered under id null, NaN params run as
 * null) is refused as no JSON text is, rather than read as something the client never sent.
 */
export function isNonFiniteFloat(bytes: Uint8Array, at: number, size: number): boolean {
  const high = bytes[at]!;
  const next = bytes[at + 1]!;
  if (size === 2) return (high & 0x7c) === 0x7c;
  if (size === 4) return (high & 0x7f) === 0x7f && (next & 0x80) === 0x80;
  return (high & 0x7f) === 0x7f && (next & 0xf0) === 0xf0;
}

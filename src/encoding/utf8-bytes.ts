/**
 * Whether `bytes[start, end)` are well-formed UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF, no sequence cut short), read in place: the binary checks
 * run on every string of every frame, in the browser too, so nothing is allocated and no Node
 * API is needed. A decoder reads the bytes this refuses as U+FFFD, a character the peer never
 * sent.
 */
export function isWellFormedUtf8(bytes: Uint8Array, start: number, end: number): boolean {
  let i = start;
  while (i < end) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      i++;
      continue;
    }
    // How many continuation bytes follow, and the range of the first (it rules out the
    // overlong forms, the surrogates and what lies past U+10FFFF).
    let follow: number;
    let low = 0x80;
    let high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) follow = 1;
    else if (lead >= 0xe0 && lead <= 0xef) {
      follow = 2;
      if (lead === 0xe0) low = 0xa0;
      else if (lead === 0xed) high = 0x9f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      follow = 3;
      if (lead === 0xf0) low = 0x90;
      else if (lead === 0xf4) high = 0x8f;
    } else return false;
    if (end - i - 1 < follow) return false;
    const first = bytes[i + 1]!;
    if (first < low || first > high) return false;
    for (let k = 2; k <= follow; k++) if ((bytes[i + k]! & 0xc0) !== 0x80) return false;
    i += follow + 1;
  }
  return true;
}

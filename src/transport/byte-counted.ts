const utf8 = new TextEncoder();

/**
 * `text` as a stream should be handed it so that what it holds is counted in bytes. A socket or
 * an HTTP response counts a string it holds (writableLength) by its characters, a third of the
 * UTF-8 bytes of text such as '€€€', so the slow-consumer bound and the output budget would let
 * three times their bound pile up: text that is not ASCII goes as its UTF-8 bytes, a copy of its
 * own (a slice of Node's shared pool would keep a whole pool block alive while queued). ASCII,
 * whose characters are its bytes, goes as it is: no copy. `bytes`: the text's UTF-8 length, when
 * the caller has it.
 */
export function byteCounted(text: string, bytes = Buffer.byteLength(text)): string | Uint8Array {
  return bytes === text.length ? text : utf8.encode(text);
}

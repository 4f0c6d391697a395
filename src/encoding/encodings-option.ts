import { refuse } from '../peer/option-rules.js';
import type { Rule } from '../peer/option-rules.js';
import { ENCODING_NAMES } from './codec.js';
import type { EncodingName } from './codec.js';

/** The gateway's `encodings` option: an array of 'json', 'msgpack' and 'cbor'. */
export const encodingsRule: Rule = (value, name) => {
  if (
    !Array.isArray(value) ||
    value.some((item) => !ENCODING_NAMES.includes(item as EncodingName))
  ) {
    refuse(name, `an array of ${ENCODING_NAMES.map((e) => `"${e}"`).join(', ')}`, value);
  }
};

/** The encodings on: those given, without repeats, JSON always among them (first). */
export function resolveEncodings(given: readonly EncodingName[] | undefined): EncodingName[] {
  return [...new Set<EncodingName>(['json', ...(given ?? [])])];
}

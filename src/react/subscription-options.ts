// useSubscription's options, checked once per change with the rules every option of the
// package goes through: the history window, and the buffer of messages waiting for an async
// parse (a contract's schema), with `iterate`'s semantics and default.
import { DEFAULT_ITERATE_BUFFER } from '../client/async-iterate.js';
import { checkOptions, numberIn, oneOf, refuse } from '../peer/option-rules.js';
import type { Rule } from '../peer/option-rules.js';

/** What a message arriving with the buffer full does (see UseSubscriptionOptions.overflow). */
export type Overflow = 'drop-oldest' | 'error';

/** The buffer of messages waiting for the parse, resolved. */
export interface SubscriptionBuffer {
  bufferSize: number;
  overflow: Overflow;
}

/** Any number but NaN (named as such: it shows as null in JSON). */
const count: Rule = (value, name) => {
  if (Number.isNaN(value)) throw new TypeError(`${name} must be a number, not NaN`);
  if (typeof value !== 'number') refuse(name, 'a number', value);
};

/** useSubscription's options resolved: how many messages `history` shows, and the buffer. */
export interface SubscriptionSettings {
  window: number;
  buffer: SubscriptionBuffer;
}

/**
 * The options checked (a TypeError or RangeError naming the one refused), with their defaults.
 * `history` is a count: a fraction is floored, one below 0 keeps none; NaN is refused, since
 * no window it gives would bound what is kept.
 */
export function resolveSubscriptionOptions(
  history: number | undefined,
  bufferSize: number | undefined,
  overflow: Overflow | undefined,
): SubscriptionSettings {
  const rules = {
    history: count,
    bufferSize: numberIn(1, Infinity, true),
    overflow: oneOf('drop-oldest', 'error'),
  };
  checkOptions({ history, bufferSize, overflow }, rules, '', 'useSubscription');
  return {
    window: Math.max(0, Math.floor(history ?? 0)),
    buffer: {
      bufferSize: bufferSize ?? DEFAULT_ITERATE_BUFFER,
      overflow: overflow ?? 'drop-oldest',
    },
  };
}

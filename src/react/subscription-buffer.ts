// How many messages a subscription hook holds while they wait for an async parse (a contract's
// schema), and what a full buffer does: the semantics of `iterate`'s buffer, with its default.
import { DEFAULT_ITERATE_BUFFER } from '../client/async-iterate.js';
import { checkOptions, numberIn, oneOf } from '../peer/option-rules.js';

/** What a message arriving with the buffer full does (see UseSubscriptionOptions.overflow). */
export type Overflow = 'drop-oldest' | 'error';

/** The buffer of messages waiting for the parse, resolved. */
export interface SubscriptionBuffer {
  bufferSize: number;
  overflow: Overflow;
}

/** `useSubscription`'s buffer options checked (a TypeError or RangeError naming the option), with their defaults. */
export function resolveSubscriptionBuffer(
  bufferSize: number | undefined,
  overflow: Overflow | undefined,
): SubscriptionBuffer {
  const rules = {
    bufferSize: numberIn(1, Infinity, true),
    overflow: oneOf('drop-oldest', 'error'),
  };
  checkOptions({ bufferSize, overflow }, rules, '', 'useSubscription');
  return { bufferSize: bufferSize ?? DEFAULT_ITERATE_BUFFER, overflow: overflow ?? 'drop-oldest' };
}

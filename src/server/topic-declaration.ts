// What `gateway.topic(pattern, options)` and `gateway.stream(name, handler, flow)` are given,
// checked before anything is declared, as createGateway checks its options: an unknown key is
// refused naming the nearest known one, a value of the wrong type or out of range naming the
// option. A topic's options are read once, when a subscription or a publish needs them, so a
// misspelt `history.maxAge` or a `slowConsumer: 'keep_latest'` would otherwise be defaults (or no
// policy at all) met only in production.
import { checkOptions, isRecord, numberIn, ofType, oneOf, refuse } from '../peer/option-rules.js';
import type { Rule } from '../peer/option-rules.js';

/** Infinity, or a number `rule` takes. */
function orInfinity(rule: Rule, what: string): Rule {
  return (value, name) => {
    if (value === Infinity) return;
    try {
      rule(value, name);
    } catch (err) {
      refuse(name, what, value, err instanceof RangeError);
    }
  };
}

/** A slow-consumer policy and its high-water mark: a topic's options, a stream's `flow`. */
const flowRules: Record<string, Rule> = {
  slowConsumer: oneOf('drop', 'keep-latest', 'disconnect'),
  highWaterMark: numberIn(0, Number.MAX_SAFE_INTEGER, true),
};

const historyRules: Record<string, Rule> = {
  maxLength: orInfinity(
    numberIn(0, Number.MAX_SAFE_INTEGER, true),
    'an integer at least 0 (0: none kept), or Infinity',
  ),
  maxAgeMs: orInfinity(
    numberIn(1, Number.MAX_SAFE_INTEGER, true),
    'an integer at least 1 (ms), or Infinity',
  ),
};

const topicRules: Record<string, Rule | null> = {
  ...flowRules,
  authorize: ofType('function'),
  history: ofType('object', 'an object { maxLength, maxAgeMs }'),
  latestValue: ofType('boolean', 'true or false'),
  // Checked, with its own messages, by resolvePresence.
  presence: null,
};

/**
 * `pattern` a string (else a TypeError), an exact name or a prefix ending in `*`, so not empty
 * and with no `*` before its last character (else a RangeError: a `*` is read only at the end, so
 * `a*b` would be the literal name); `options` an object or undefined, its keys and values as
 * TopicOptions says (an unknown key or a wrong type: TypeError; out of range: RangeError).
 */
export function checkTopicDeclaration(pattern: unknown, options: unknown): void {
  const what = 'an exact name or a prefix ending in "*" (no "*" elsewhere)';
  if (typeof pattern !== 'string') refuse('topic pattern', `a string, ${what}`, pattern);
  if (pattern === '' || pattern.slice(0, -1).includes('*')) {
    refuse('topic pattern', what, pattern, true);
  }
  if (options === undefined) return;
  const owner = `topic "${pattern}"`;
  if (!isRecord(options)) refuse(`${owner}: options`, 'an object', options);
  naming(owner, () => {
    const given = checkOptions(options, topicRules, '', owner);
    if (given['history'] !== undefined) {
      checkOptions(given['history'], historyRules, 'history.', owner);
    }
  });
}

/**
 * Run `check`, its refusal of a value named as the topic's or stream's (`topic "t": highWaterMark
 * must be ...`); one of an unknown key names its owner already.
 */
function naming(owner: string, check: () => void): void {
  try {
    check();
  } catch (err) {
    if (!(err instanceof Error) || err.message.includes(' is not an option of ')) throw err;
    const Refusal = err instanceof RangeError ? RangeError : TypeError;
    throw new Refusal(`${owner}: ${err.message}`);
  }
}

/**
 * `name` a string (else a TypeError), not empty and without `*` (else a RangeError: a stream has
 * one exact name, a prefix pattern can only be a topic); `handler` a function, and `flow` an
 * object or undefined with a policy and high-water mark as a topic's (else a TypeError, or a
 * RangeError out of range).
 */
export function checkStreamDeclaration(name: unknown, handler: unknown, flow: unknown): void {
  const what = 'an exact name, not empty and without "*" (a prefix pattern can only be a topic)';
  if (typeof name !== 'string') refuse('stream name', `a string, ${what}`, name);
  if (name === '' || name.includes('*')) refuse('stream name', what, name, true);
  if (typeof handler !== 'function') refuse(`stream "${name}": handler`, 'a function', handler);
  if (flow === undefined) return;
  if (!isRecord(flow)) refuse(`stream "${name}": flow`, 'an object', flow);
  naming(`stream "${name}"`, () => checkOptions(flow, flowRules, 'flow.', `stream "${name}"`));
}

/**
 * `options` without the keys whose value is undefined (its `history`'s too): a topic's defaults
 * are spread under its options, and `{ highWaterMark: undefined }` (an unset setting passed on)
 * would replace the default with nothing rather than leave it.
 */
export function definedOptions<T extends object>(options: T | undefined): T | undefined {
  if (options === undefined) return undefined;
  const defined: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined) continue;
    defined[key] = key === 'history' && isRecord(value) ? definedOptions(value) : value;
  }
  return defined as T;
}

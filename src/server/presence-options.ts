// The `presence` option of a topic declaration (gateway.topic(pattern, { presence })): what it
// may be, checked when the topic is declared, and what it means once resolved.
import { DEFAULT_PRESENCE_MAX_LISTED, MAX_PRESENCE_PAGE } from '../pubsub/presence.js';
import type { Session } from './session.js';

/** Presence of a topic: `true`, or these settings. */
export interface TopicPresenceOptions<C> {
  /**
   * A small object about the session shown with it in the member list (at most 1 KiB of JSON;
   * a larger one is left out, with a warning).
   */
  info?: (session: Session<C>) => Record<string, unknown>;
  /**
   * Members listed at most in a presence subscription's first page and in one event's
   * `joined` and `left` lists (the rest counted in `truncated`). 1 to 1 000, default 1 000.
   */
  maxListed?: number;
}

/** A topic's presence, resolved. */
export interface ResolvedPresence<C> {
  info: ((session: Session<C>) => Record<string, unknown>) | undefined;
  maxListed: number;
}

/**
 * The `presence` option of topic `pattern`, checked: undefined when off. A value of the wrong
 * type is a TypeError, `maxListed` out of range a RangeError, each naming the option.
 */
export function resolvePresence<C>(
  pattern: string,
  value: boolean | TopicPresenceOptions<C> | undefined,
): ResolvedPresence<C> | undefined {
  const name = `topic "${pattern}": presence`;
  if (value === undefined || value === false) return undefined;
  if (value === true) return { info: undefined, maxListed: DEFAULT_PRESENCE_MAX_LISTED };
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(`${name} must be true or an object { info, maxListed }`);
  }
  for (const key of Object.keys(value)) {
    if (key !== 'info' && key !== 'maxListed') {
      throw new TypeError(`${name}.${key} is not an option (info, maxListed)`);
    }
  }
  if (value.info !== undefined && typeof value.info !== 'function') {
    throw new TypeError(`${name}.info must be a function (session) => object`);
  }
  const maxListed = value.maxListed ?? DEFAULT_PRESENCE_MAX_LISTED;
  if (!Number.isInteger(maxListed) || maxListed < 1 || maxListed > MAX_PRESENCE_PAGE) {
    throw new RangeError(
      `${name}.maxListed must be an integer from 1 to ${MAX_PRESENCE_PAGE}, not ${String(value.maxListed)}`,
    );
  }
  return { info: value.info, maxListed };
}

import { InvalidParamsError } from '../protocol/errors.js';

/** The most messages one `history` call answers (and its default `limit`). */
export const MAX_HISTORY_PAGE = 100;

/** What a `history` call asks for: the last messages, or those after a seq, at most `limit`. */
export interface HistoryRequest {
  topic: string;
  /** The last `last` messages (with neither `last` nor `since`: the last `limit`). */
  last?: number;
  /** The messages after this seq, oldest first. */
  since?: number;
  /** At most this many messages: 1 to MAX_HISTORY_PAGE, default MAX_HISTORY_PAGE. */
  limit: number;
}

const FIELDS = ['topic', 'last', 'since', 'limit'];

/**
 * Read `{ "topic": t, "last"?: n, "since"?: seq, "limit"?: n }` (or `[t, { last, since, limit }]`).
 * Refused with -32602 naming the field and what it must be.
 */
export function readHistoryParams(params: unknown): HistoryRequest {
  const named = Array.isArray(params)
    ? { ...(isObject(params[1]) ? params[1] : {}), topic: params[0] as unknown }
    : params;
  if (!isObject(named)) {
    throw new InvalidParamsError('history takes { topic, last?, since?, limit? }');
  }
  for (const key of Object.keys(named)) {
    if (!FIELDS.includes(key)) {
      throw new InvalidParamsError(
        `${key} is not a param of history (it takes ${FIELDS.join(', ')})`,
        {
          field: key,
        },
      );
    }
  }
  const topic = named['topic'];
  if (typeof topic !== 'string' || topic.length === 0) {
    throw invalid('topic', 'a topic name (a non-empty string)');
  }
  const last = integer(named, 'last', 1, MAX_HISTORY_PAGE);
  const since = integer(named, 'since', 0, Number.MAX_SAFE_INTEGER);
  if (last !== undefined && since !== undefined)
    throw invalid('since', 'absent when last is given');
  const limit = integer(named, 'limit', 1, MAX_HISTORY_PAGE) ?? MAX_HISTORY_PAGE;
  return { topic, last, since, limit };
}

function integer(
  params: Record<string, unknown>,
  field: string,
  min: number,
  max: number,
): number | undefined {
  const value = params[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalid(field, `an integer from ${min} to ${max}`);
  }
  return value;
}

function invalid(field: string, expected: string): InvalidParamsError {
  return new InvalidParamsError(`history: ${field} must be ${expected}`, { field });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

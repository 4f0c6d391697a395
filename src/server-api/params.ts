// Reading a server API request's params (by name): each refusal is -32602 Invalid params naming
// the field and what it must be, in `data.field`.
import { InvalidParamsError } from '../protocol/errors.js';
import { isWellFormed } from '../protocol/well-formed.js';
import { MAX_EXCEPT } from '../pubsub/broker.js';

export type NamedParams = Readonly<Record<string, unknown>>;

/** The params object, refusing positional params and members the method does not take. */
export function named(params: unknown, method: string, allowed: readonly string[]): NamedParams {
  if (params === undefined) return {};
  if (typeof params !== 'object' || params === null || Array.isArray(params)) {
    throw new InvalidParamsError(`${method} takes its params by name (an object)`);
  }
  for (const key of Object.keys(params)) {
    if (!allowed.includes(key)) {
      throw new InvalidParamsError(
        `${key} is not a param of ${method} (it takes ${allowed.join(', ')})`,
        {
          field: key,
        },
      );
    }
  }
  return params as NamedParams;
}

export function invalid(field: string, expected: string): InvalidParamsError {
  return new InvalidParamsError(`${field} must be ${expected}`, { field });
}

/** A string of 1 to `max` characters. */
export function text(params: NamedParams, field: string, max = 1024): string {
  const value = params[field];
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    throw invalid(field, `a string of 1 to ${max} characters`);
  }
  return value;
}

export function optionalText(params: NamedParams, field: string, max = 1024): string | undefined {
  return params[field] === undefined ? undefined : text(params, field, max);
}

/** An integer from `min` to `max`, or undefined when absent. */
export function optionalInteger(
  params: NamedParams,
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

/** A topic a backend may publish to or read: not one of the gateway's own (`$...`, `~...`). */
export function topicName(params: NamedParams, field = 'topic'): string {
  const topic = text(params, field);
  if (topic.startsWith('$') || topic.startsWith('~')) {
    throw invalid(field, 'a topic name not starting with "$" or "~" (the gateway\'s own)');
  }
  // Sent as UTF-8 a lone surrogate becomes U+FFFD: the name would be its twin's.
  if (!isWellFormed(topic)) throw invalid(field, 'well-formed Unicode (no lone surrogate)');
  return topic;
}

/** `except`: a list of at most MAX_EXCEPT session ids (strings of 1 to 256 characters), or absent. */
export function exceptIds(params: NamedParams, field = 'except'): readonly string[] | undefined {
  const value = params[field];
  if (value === undefined) return undefined;
  if (
    !Array.isArray(value) ||
    value.length > MAX_EXCEPT ||
    !value.every((id) => typeof id === 'string' && id.length > 0 && id.length <= 256)
  ) {
    throw invalid(field, `an array of at most ${MAX_EXCEPT} session ids (strings)`);
  }
  return value.length === 0 ? undefined : (value as string[]);
}

/** Params to pass on to a client: an object, an array, or absent. */
export function passedParams(
  params: NamedParams,
  field = 'params',
): Record<string, unknown> | unknown[] | undefined {
  const value = params[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null) throw invalid(field, 'an object or an array');
  return value as Record<string, unknown> | unknown[];
}

/** A method name to call or notify on a client: not a reserved `rpc.` one. */
export function clientMethod(params: NamedParams, field = 'method'): string {
  const method = text(params, field, 256);
  if (method.startsWith('rpc.')) throw invalid(field, 'a method name not starting with "rpc."');
  return method;
}

import type { StandardSchemaV1 } from '@standard-schema/spec';
import { InternalError, InvalidParamsError } from '../protocol/errors.js';
import type { Params } from '../protocol/types.js';
import type { MethodSpec, Schema } from './contract.js';
import { paramsShape } from './json-schema.js';

/**
 * The `data` of a -32602 reply from contract validation, a stable shape:
 * `{ "issues": [{ "path": ["minuend"], "message": "Expected number" }] }`
 * where `path` leads from the params to the offending value (empty for the params themselves).
 * At most MAX_REPORTED_ISSUES issues are listed, in the schema's order; `omitted` counts the
 * rest, and is there only when there are some.
 */
export interface ValidationIssues {
  issues: { path: (string | number)[]; message: string }[];
  omitted?: number;
}

/**
 * The issues a -32602 lists: a request failing in many places (each item of a long array) is
 * answered with the first ones, not with one issue per item (a reply many times the request).
 */
export const MAX_REPORTED_ISSUES = 20;
/**
 * The longest member name a path shows; longer ones are cut and end in "…". A record key is
 * the client's own text, repeated in the path of every issue under it.
 */
export const MAX_ISSUE_KEY_CHARS = 64;
/** The longest message an issue shows (a schema library may quote the input in it). */
export const MAX_ISSUE_MESSAGE_CHARS = 256;

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

function toPath(issue: StandardSchemaV1.Issue): (string | number)[] {
  return (issue.path ?? []).map((segment) => {
    const key = typeof segment === 'object' ? segment.key : segment;
    return typeof key === 'number' ? key : cut(String(key), MAX_ISSUE_KEY_CHARS);
  });
}

function describe(issues: readonly StandardSchemaV1.Issue[]): ValidationIssues {
  const listed = issues.slice(0, MAX_REPORTED_ISSUES).map((issue) => ({
    path: toPath(issue),
    message: cut(issue.message, MAX_ISSUE_MESSAGE_CHARS),
  }));
  return issues.length > MAX_REPORTED_ISSUES
    ? { issues: listed, omitted: issues.length - MAX_REPORTED_ISSUES }
    : { issues: listed };
}

/** Positional params mapped onto the names the contract gives them; named params pass through. */
export function normalizeParams(spec: MethodSpec, params: Params | undefined): unknown {
  if (!Array.isArray(params) || !spec.paramOrder) return params;
  const order = spec.paramOrder;
  if (params.length > order.length) {
    throw new InvalidParamsError('Invalid params', {
      issues: [
        {
          path: [],
          message: `Expected at most ${order.length} positional params, got ${params.length}`,
        },
      ],
    } satisfies ValidationIssues);
  }
  const named: Record<string, unknown> = {};
  order.forEach((name, i) => {
    if (i < params.length) named[name] = (params as unknown[])[i];
  });
  return named;
}

function isPromise<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}

/**
 * Continue with `next` now when `value` is ready, later when it is a promise: sync schemas stay
 * sync. A thenable that is not a native promise (a schema library's own) is made one first: its
 * `then` need not return anything, and callers tell a pending parse by `instanceof Promise`.
 */
export function andThen<T, U>(
  value: T | Promise<T>,
  next: (ready: T) => U | Promise<U>,
): U | Promise<U> {
  return isPromise(value) ? Promise.resolve(value).then(next) : next(value);
}

function checked(
  result: StandardSchemaV1.Result<unknown>,
  fail: (issues: ValidationIssues) => Error,
): unknown {
  if (result.issues) throw fail(describe(result.issues));
  return result.value;
}

/** Absent params, `[]` or `{}`: what a method without a params schema accepts. */
function isEmpty(params: Params | undefined): boolean {
  if (params === undefined || params === null) return true;
  return Array.isArray(params) ? params.length === 0 : Object.keys(params).length === 0;
}

/**
 * Validate incoming params; throws -32602 with the issues when they do not match.
 * Synchronous when the schema is (zod's usually are), so a plain handler stays a plain call.
 * Without a params schema the method takes none: absent, `[]` or `{}` reach the handler as
 * `undefined`, anything else is -32602.
 */
export function validateParams(spec: MethodSpec, params: Params | undefined): unknown {
  if (!spec.params) {
    if (isEmpty(params)) return undefined;
    throw new InvalidParamsError('Invalid params', {
      issues: [{ path: [], message: 'Expected no params' }],
    } satisfies ValidationIssues);
  }
  const value = normalizeParams(spec, params);
  const fail = (issues: ValidationIssues) => new InvalidParamsError('Invalid params', issues);
  return andThen(spec.params['~standard'].validate(value), (result) => checked(result, fail));
}

/**
 * `{"params": X}` becomes X: how the OpenRPC document tells clients to send params that are
 * neither an object nor a tuple (a variadic array, a union) by name.
 */
function unwrap(params: Params | undefined): Params | undefined {
  if (!params || Array.isArray(params)) return params;
  const keys = Object.keys(params);
  return keys.length === 1 && keys[0] === 'params'
    ? ((params as { params: Params }).params ?? params)
    : params;
}

/**
 * `validateParams` for one method, its params shape worked out once: params the document
 * describes as one member named "params" are accepted in that form too (`{"params": X}` is
 * X). Only when the schema's JSON Schema is known: a schema without one may well take an
 * object whose only member is `params`.
 */
export function paramsValidator(spec: MethodSpec): (params: Params | undefined) => unknown {
  const wrapped = paramsShape(spec.params) === 'wrapped';
  return (params) => validateParams(spec, wrapped ? unwrap(params) : params);
}

/** Parse `value` with `schema`: its output, or `fail(issues)` thrown. Synchronous when the schema is. */
export function parseWith(
  schema: Schema,
  value: unknown,
  fail: (issues: ValidationIssues) => Error,
): unknown {
  return andThen(schema['~standard'].validate(value), (result) => checked(result, fail));
}

/**
 * Parse a result with the method's result schema: its output (defaults applied, transforms
 * run), as the receiving side gets it. A mismatch is the other side's bug, so -32603.
 */
export function validateResult(spec: MethodSpec, method: string, value: unknown): unknown {
  if (!spec.result) return value;
  return parseWith(
    spec.result,
    value,
    (issues) => new InternalError('Result does not match the contract', { method, ...issues }),
  );
}

/**
 * Parse one message of a subscription with its data schema, as the client receives it. A
 * mismatch is the server's bug, so -32603.
 */
export function validateMessage(schema: Schema, subscription: string, data: unknown): unknown {
  return parseWith(
    schema,
    data,
    (issues) =>
      new InternalError('Subscription data does not match the contract', {
        subscription,
        ...issues,
      }),
  );
}

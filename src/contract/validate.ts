import type { StandardSchemaV1 } from '@standard-schema/spec';
import { InternalError, InvalidParamsError } from '../protocol/errors.js';
import type { Params } from '../protocol/types.js';
import type { MethodSpec } from './contract.js';

/**
 * The `data` of a -32602 reply from contract validation, a stable shape:
 * `{ "issues": [{ "path": ["minuend"], "message": "Expected number" }] }`
 * where `path` leads from the params to the offending value (empty for the params themselves).
 */
export interface ValidationIssues {
  issues: { path: (string | number)[]; message: string }[];
}

function toPath(issue: StandardSchemaV1.Issue): (string | number)[] {
  return (issue.path ?? []).map((segment) => {
    const key = typeof segment === 'object' ? segment.key : segment;
    return typeof key === 'number' ? key : String(key);
  });
}

function describe(issues: readonly StandardSchemaV1.Issue[]): ValidationIssues {
  return { issues: issues.map((issue) => ({ path: toPath(issue), message: issue.message })) };
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

/** Continue with `next` now when `value` is ready, later when it is a promise: sync schemas stay sync. */
export function andThen<T, U>(
  value: T | Promise<T>,
  next: (ready: T) => U | Promise<U>,
): U | Promise<U> {
  return isPromise(value) ? value.then(next) : next(value);
}

function checked(
  result: StandardSchemaV1.Result<unknown>,
  fail: (issues: ValidationIssues) => Error,
): unknown {
  if (result.issues) throw fail(describe(result.issues));
  return result.value;
}

/**
 * Validate incoming params; throws -32602 with the issues when they do not match.
 * Synchronous when the schema is (zod's usually are), so a plain handler stays a plain call.
 */
export function validateParams(spec: MethodSpec, params: Params | undefined): unknown {
  const value = normalizeParams(spec, params);
  if (!spec.params) return value;
  const fail = (issues: ValidationIssues) => new InvalidParamsError('Invalid params', issues);
  return andThen(spec.params['~standard'].validate(value), (result) => checked(result, fail));
}

/** Validate a handler's result (debug mode); a mismatch is the server's bug, so -32603. */
export function validateResult(spec: MethodSpec, method: string, value: unknown): unknown {
  if (!spec.result) return value;
  const fail = (issues: ValidationIssues) =>
    new InternalError('Result does not match the contract', { method, ...issues });
  return andThen(spec.result['~standard'].validate(value), (result) => checked(result, fail));
}

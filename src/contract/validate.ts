import type { StandardSchemaV1 } from '@standard-schema/spec';
import { InternalError, InvalidParamsError } from '../protocol/errors.js';
import type { Params } from '../protocol/types.js';
import type { MethodSpec, Schema } from './contract.js';
import { paramsShape } from './json-schema.js';

/**
 * The `data` of a -32602 reply from contract validation, a stable shape:
 * `{ "issues": [{ "path": ["minuend"], "message": "Expected number" }] }`
 * where `path` leads from the params to the offending value (empty for the params themselves).
 * At most MAX_REPORTED_ISSUES issues are listed, in the schema's order, and no more than fit in
 * MAX_ISSUES_DATA_BYTES; `omitted` counts the rest, and is there only when there are some. A
 * path deeper than ISSUE_PATH_HEAD + ISSUE_PATH_TAIL segments shows its first and last ones
 * with PATH_GAP between them, and `pathOmitted` counts the segments the gap stands for.
 */
export interface ValidationIssues {
  issues: { path: (string | number)[]; message: string; pathOmitted?: number }[];
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
/**
 * The first segments a deep path shows. Params may nest as deep as limits.maxDepth (512), and a
 * recursive schema names every level of the way to each bad value.
 */
export const ISSUE_PATH_HEAD = 8;
/** The last segments a deep path shows: those nearest the bad value. */
export const ISSUE_PATH_TAIL = 8;
/** The segment standing for those a deep path leaves out (counted in the issue's `pathOmitted`). */
export const PATH_GAP = '…';
/**
 * The most a -32602's `data` takes in any encoding: its JSON text's UTF-8 bytes, and its
 * MessagePack or CBOR bytes. Issues that would take it further are counted in `omitted`. Room
 * for one issue at every bound and more (about 8.3 KB: a message and 17 keys of control
 * characters, each escaped in 6 bytes), so the first issue is always listed.
 */
export const MAX_ISSUES_DATA_BYTES = 16 * 1024;

/** What a number takes at most: JSON's longest (`-1.7976931348623157e+308`); 9 bytes in binary. */
const NUMBER_BYTES = 24;
/**
 * What `data` takes besides its issues, `omitted` included (`{"issues":[],"omitted":N}`), and
 * what an issue takes besides its path segments and message (`{"path":[],"message":,
 * "pathOmitted":N},`), both with room to spare: the binary encodings' headers are smaller.
 */
const DATA_OVERHEAD_BYTES = 64;
const ISSUE_OVERHEAD_BYTES = 64;

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

/** `text` cut to `max` code units and "…", never between the two halves of a surrogate pair. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const end = isHighSurrogate(text.charCodeAt(max - 1)) ? max - 1 : max;
  return `${text.slice(0, end)}…`;
}

/** The bytes one UTF-16 code unit takes in JSON text (JSON.stringify's escapes, UTF-8). */
function unitBytes(code: number): number {
  if (code === 0x22 || code === 0x5c) return 2; // \" \\
  if (code < 0x20) return code >= 0x08 && code <= 0x0d && code !== 0x0b ? 2 : 6; // \n, \u0001
  if (code < 0x80) return 1;
  if (code < 0x800) return 2;
  return code >= 0xd800 && code <= 0xdfff ? 6 : 3; // a lone surrogate is escaped: \ud800
}

/**
 * The most `text` takes as a string in JSON (quotes and escapes, UTF-8), MessagePack or CBOR
 * (UTF-8 and a header of at most 3 bytes for strings this short): JSON's bytes and one.
 */
function stringBytes(text: string): number {
  let bytes = 3;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    const next = text.charCodeAt(i + 1);
    if (isHighSurrogate(code) && next >= 0xdc00 && next <= 0xdfff) {
      bytes += 4; // a pair: one code point of 4 UTF-8 bytes, written as it is
      i++;
    } else bytes += unitBytes(code);
  }
  return bytes;
}

type ReportedIssue = ValidationIssues['issues'][number];

function segmentOf(segment: PropertyKey | StandardSchemaV1.PathSegment): string | number {
  const key = typeof segment === 'object' ? segment.key : segment;
  // NaN and the infinities would be JSON's null: shown as text, as any other key is.
  return typeof key === 'number' && Number.isFinite(key)
    ? key
    : cut(String(key), MAX_ISSUE_KEY_CHARS);
}

/** The issue as a -32602 shows it: keys, message and path cut to their bounds. */
function reported(issue: StandardSchemaV1.Issue): ReportedIssue {
  const message = cut(issue.message, MAX_ISSUE_MESSAGE_CHARS);
  const full = issue.path ?? [];
  const left = full.length - ISSUE_PATH_HEAD - ISSUE_PATH_TAIL;
  if (left <= 0) return { path: full.map(segmentOf), message };
  // Only the segments shown are converted: a path may be maxDepth segments long.
  const head = full.slice(0, ISSUE_PATH_HEAD).map(segmentOf);
  const tail = full.slice(full.length - ISSUE_PATH_TAIL).map(segmentOf);
  return { path: [...head, PATH_GAP, ...tail], message, pathOmitted: left };
}

/** The most `issue` takes in `data`, in any encoding (see MAX_ISSUES_DATA_BYTES). */
function issueBytes(issue: ReportedIssue): number {
  let bytes = ISSUE_OVERHEAD_BYTES + stringBytes(issue.message);
  for (const segment of issue.path) {
    bytes += 1 + (typeof segment === 'number' ? NUMBER_BYTES : stringBytes(segment));
  }
  return bytes;
}

/**
 * The first issues, in the schema's order, as many as MAX_REPORTED_ISSUES and
 * MAX_ISSUES_DATA_BYTES allow; the rest counted in `omitted`.
 */
function describe(issues: readonly StandardSchemaV1.Issue[]): ValidationIssues {
  const listed: ReportedIssue[] = [];
  let bytes = DATA_OVERHEAD_BYTES;
  for (const issue of issues) {
    if (listed.length === MAX_REPORTED_ISSUES) break;
    const shown = reported(issue);
    bytes += issueBytes(shown);
    if (bytes > MAX_ISSUES_DATA_BYTES) break;
    listed.push(shown);
  }
  const omitted = issues.length - listed.length;
  return omitted > 0 ? { issues: listed, omitted } : { issues: listed };
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

/** What `wrappedValue` answers for params not of the form `{"params": X}`. */
const NOT_WRAPPED = Symbol('not wrapped');

/**
 * X of params `{"params": X}` (an object whose only member is `params`, X whatever it is, null
 * included): how the OpenRPC document tells clients to send params that are neither an object
 * nor a tuple (a variadic array, a union) by name. NOT_WRAPPED for any other params.
 */
function wrappedValue(params: Params | undefined): Params | undefined | typeof NOT_WRAPPED {
  if (params === undefined || params === null || Array.isArray(params)) return NOT_WRAPPED;
  const keys = Object.keys(params);
  return keys.length === 1 && keys[0] === 'params'
    ? (params as { params: Params | undefined }).params
    : NOT_WRAPPED;
}

/**
 * `second()` when `first()` fails validation (throws or rejects with -32602), and if that
 * fails too, `first`'s failure. Synchronous when both are.
 */
function eitherValid(first: () => unknown, second: () => unknown): unknown {
  let result: unknown;
  try {
    result = first();
  } catch (err) {
    return fallBack(err, second);
  }
  return result instanceof Promise ? result.catch((err: unknown) => fallBack(err, second)) : result;
}

function fallBack(failure: unknown, second: () => unknown): unknown {
  if (!(failure instanceof InvalidParamsError)) throw failure;
  const instead = (err: unknown): never => {
    throw err instanceof InvalidParamsError ? failure : err;
  };
  let result: unknown;
  try {
    result = second();
  } catch (err) {
    return instead(err);
  }
  return result instanceof Promise ? result.catch(instead) : result;
}

/**
 * `validateParams` for one method, its params shape worked out once. Params the document
 * describes as one member named "params" are accepted in that form: `{"params": X}` is
 * validated as X, and when X does not pass, as sent (the schema may take such an object
 * itself: a union with a member `params`); when neither passes, the answer has X's issues, the
 * form the document gives. Only when the schema's JSON Schema is known: a schema without one
 * may well take an object whose only member is `params`.
 */
export function paramsValidator(spec: MethodSpec): (params: Params | undefined) => unknown {
  const validate = (params: Params | undefined) => validateParams(spec, params);
  if (paramsShape(spec.params) !== 'wrapped') return validate;
  return (params) => {
    const inner = wrappedValue(params);
    if (inner === NOT_WRAPPED) return validate(params);
    return eitherValid(
      () => validate(inner),
      () => validate(params),
    );
  };
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

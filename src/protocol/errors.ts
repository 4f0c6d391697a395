import {
  ErrorCode,
  SERVER_ERROR_MAX,
  SERVER_ERROR_MIN,
  defaultErrorMessage,
} from './error-codes.js';
import type { ErrorObject } from './types.js';

/**
 * An error that travels on the wire as a JSON-RPC error object.
 * Throw it (or a subclass) from a handler to answer with that code, message and data.
 */
export class JsonRpcError extends Error {
  override name = 'JsonRpcError';
  readonly code: number;
  readonly data: unknown;
  /**
   * The method of the call this error answers, when it is the other side's answer to a call of
   * this peer's: what "Method not found" or "Invalid params" was said of.
   */
  method?: string;

  constructor(code: number, message?: string, data?: unknown) {
    super(message ?? defaultErrorMessage[code] ?? 'Server error');
    this.code = code;
    this.data = data;
  }

  toErrorObject(): ErrorObject {
    const obj: ErrorObject = { code: this.code, message: this.message };
    if (this.data !== undefined) obj.data = this.data;
    return obj;
  }

  /** Rebuild the error a remote peer sent, keeping the class for known codes. */
  static fromErrorObject(obj: ErrorObject): JsonRpcError {
    const Known = errorClassByCode.get(obj.code);
    if (Known) return new Known(obj.message, obj.data);
    return new JsonRpcError(obj.code, obj.message, obj.data);
  }
}

export class ParseError extends JsonRpcError {
  override name = 'ParseError';
  constructor(message?: string, data?: unknown) {
    super(ErrorCode.ParseError, message, data);
  }
}

export class InvalidRequestError extends JsonRpcError {
  override name = 'InvalidRequestError';
  constructor(message?: string, data?: unknown) {
    super(ErrorCode.InvalidRequest, message, data);
  }
}

export class MethodNotFoundError extends JsonRpcError {
  override name = 'MethodNotFoundError';
  constructor(message?: string, data?: unknown) {
    super(ErrorCode.MethodNotFound, message, data);
  }
}

export class InvalidParamsError extends JsonRpcError {
  override name = 'InvalidParamsError';
  constructor(message?: string, data?: unknown) {
    super(ErrorCode.InvalidParams, message, data);
  }
}

export class InternalError extends JsonRpcError {
  override name = 'InternalError';
  constructor(message?: string, data?: unknown) {
    super(ErrorCode.InternalError, message, data);
  }
}

/**
 * An implementation-defined error in the reserved -32000..-32099 range. Any other code throws
 * a RangeError at construction (rather than being mapped): a wrong code is a programming
 * error, best found where it is made. Use `JsonRpcError` for application codes outside it.
 */
export class ServerError extends JsonRpcError {
  override name = 'ServerError';

  constructor(code: number, message?: string, data?: unknown) {
    if (!Number.isInteger(code) || code < SERVER_ERROR_MIN || code > SERVER_ERROR_MAX) {
      throw new RangeError(
        `ServerError codes are integers from ${SERVER_ERROR_MIN} to ${SERVER_ERROR_MAX}, not ${code}`,
      );
    }
    super(code, message, data);
  }
}

const errorClassByCode = new Map<number, new (message?: string, data?: unknown) => JsonRpcError>([
  [ErrorCode.ParseError, ParseError],
  [ErrorCode.InvalidRequest, InvalidRequestError],
  [ErrorCode.MethodNotFound, MethodNotFoundError],
  [ErrorCode.InvalidParams, InvalidParamsError],
  [ErrorCode.InternalError, InternalError],
]);

/**
 * Whether `value` is a JSON-RPC error object as spec 5.1 defines it: an object whose `code` is
 * an integer and whose `message` is a string (`data` optional, anything). The one test, for
 * responses (classify.ts), stream errors (subscription-frames.ts) and the CLI.
 */
export function isErrorObject(value: unknown): value is ErrorObject {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const { code, message } = value as Record<string, unknown>;
  return Number.isInteger(code) && typeof message === 'string';
}

/** Whether `err` can go on the wire as it is: a JsonRpcError whose code is an integer (spec 5.1). */
export function isWireError(err: unknown): err is JsonRpcError {
  return err instanceof JsonRpcError && Number.isSafeInteger(err.code);
}

/**
 * Turn anything a handler threw into the error object to send.
 * Unknown failures, and JsonRpcErrors whose code is not an integer (NaN, 1.5: the spec says
 * the code MUST be an integer), become -32603 without their message or stack, unless
 * `exposeInternals` (a debug option) asks for them in `data`.
 */
export function toWireError(err: unknown, exposeInternals = false): ErrorObject {
  if (isWireError(err)) return err.toErrorObject();
  const obj: ErrorObject = { code: ErrorCode.InternalError, message: 'Internal error' };
  if (exposeInternals) {
    obj.data =
      err instanceof Error
        ? { name: err.name, message: err.message, stack: err.stack }
        : { message: String(err) };
  }
  return obj;
}

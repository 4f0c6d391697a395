import { ErrorCode, defaultErrorMessage } from './error-codes.js';
import { safeJsonParse } from './safe-json.js';
import type { ErrorObject, Params, ProtocolVersion, RequestId } from './types.js';

/** One incoming message, classified in a single pass. */
export type Incoming =
  | {
      kind: 'request';
      version: ProtocolVersion;
      id: RequestId;
      method: string;
      params: Params | undefined;
    }
  | { kind: 'notification'; version: ProtocolVersion; method: string; params: Params | undefined }
  | { kind: 'success'; version: ProtocolVersion; id: RequestId; result: unknown }
  | { kind: 'failure'; version: ProtocolVersion; id: RequestId; error: ErrorObject }
  /** Not a valid Request: answered with `error` under `id` (null when no id could be read). */
  | { kind: 'invalid'; version: ProtocolVersion; id: RequestId; error: ErrorObject }
  /** A malformed Response: there is no one to answer, so it is only logged. */
  | { kind: 'bad-response'; reason: string; raw: unknown };

/** A whole frame: one message, or a batch of them. */
export interface Frame {
  batch: boolean;
  messages: Incoming[];
}

export interface ClassifyOptions {
  /** Answer JSON-RPC 1.0 peers (no `jsonrpc` member) in their own shape. Default false. */
  acceptV1?: boolean;
  /** Longest batch accepted; a longer one is answered with a single error. Default Infinity. */
  maxBatch?: number;
  /** Deepest JSON nesting accepted. Default Infinity. */
  maxDepth?: number;
}

function errorObject(code: number, data?: unknown): ErrorObject {
  const obj: ErrorObject = { code, message: defaultErrorMessage[code] ?? 'Error' };
  if (data !== undefined) obj.data = data;
  return obj;
}

function single(message: Incoming): Frame {
  return { batch: false, messages: [message] };
}

export function isRequestId(value: unknown): value is RequestId {
  return (
    value === null ||
    typeof value === 'string' ||
    (typeof value === 'number' && Number.isFinite(value))
  );
}

function isParams(value: unknown): value is Params {
  return value !== null && typeof value === 'object';
}

function isErrorObject(value: unknown): value is ErrorObject {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const { code, message } = value as Record<string, unknown>;
  return Number.isInteger(code) && typeof message === 'string';
}

/** Parse the text of one frame and classify every message in it. Never throws. */
export function parseFrame(text: string, options: ClassifyOptions = {}): Frame {
  const parsed = safeJsonParse(text, options.maxDepth);
  if (!parsed.ok) {
    const error =
      parsed.reason === 'depth'
        ? errorObject(ErrorCode.TooDeep, { maxDepth: options.maxDepth })
        : errorObject(ErrorCode.ParseError);
    return single({ kind: 'invalid', version: '2.0', id: null, error });
  }
  return classifyValue(parsed.value, options);
}

/** Classify an already-parsed JSON value (one message or a batch). Never throws. */
export function classifyValue(value: unknown, options: ClassifyOptions = {}): Frame {
  if (!Array.isArray(value)) return single(classifyMessage(value, options.acceptV1 ?? false));
  // Spec 6: an empty array is answered with one error, not with an empty array.
  if (value.length === 0) {
    return single({
      kind: 'invalid',
      version: '2.0',
      id: null,
      error: errorObject(ErrorCode.InvalidRequest),
    });
  }
  const maxBatch = options.maxBatch ?? Infinity;
  if (value.length > maxBatch) {
    return single({
      kind: 'invalid',
      version: '2.0',
      id: null,
      error: errorObject(ErrorCode.BatchTooLarge, { maxBatch, received: value.length }),
    });
  }
  const acceptV1 = options.acceptV1 ?? false;
  const messages = new Array<Incoming>(value.length);
  for (let i = 0; i < value.length; i++) messages[i] = classifyMessage(value[i], acceptV1);
  return { batch: true, messages };
}

/** Classify one message object (not a batch). */
export function classifyMessage(value: unknown, acceptV1: boolean): Incoming {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return {
      kind: 'invalid',
      version: '2.0',
      id: null,
      error: errorObject(ErrorCode.InvalidRequest),
    };
  }
  const msg = value as Record<string, unknown>;
  const hasVersion = 'jsonrpc' in msg;
  const rawId = msg['id'];
  const idIfValid: RequestId = isRequestId(rawId) ? rawId : null;

  if (hasVersion ? msg['jsonrpc'] !== '2.0' : !acceptV1) {
    if (!('method' in msg) && ('result' in msg || 'error' in msg)) {
      return { kind: 'bad-response', reason: 'missing or wrong "jsonrpc" member', raw: value };
    }
    return {
      kind: 'invalid',
      version: '2.0',
      id: idIfValid,
      error: errorObject(ErrorCode.InvalidRequest),
    };
  }
  const version: ProtocolVersion = hasVersion ? '2.0' : '1.0';

  if ('method' in msg) return classifyCall(msg, version, idIfValid);
  if ('result' in msg || 'error' in msg) return classifyResponse(msg, version, value);
  return { kind: 'invalid', version, id: idIfValid, error: errorObject(ErrorCode.InvalidRequest) };
}

function classifyCall(
  msg: Record<string, unknown>,
  version: ProtocolVersion,
  idIfValid: RequestId,
): Incoming {
  const method = msg['method'];
  const params = msg['params'];
  const hasId = 'id' in msg;
  const invalid = (): Incoming => ({
    kind: 'invalid',
    version,
    id: idIfValid,
    error: errorObject(ErrorCode.InvalidRequest),
  });
  if (typeof method !== 'string') return invalid();
  if (hasId && !isRequestId(msg['id'])) return invalid();

  let checkedParams: Params | undefined;
  if (params === undefined || (version === '1.0' && params === null)) {
    checkedParams = undefined;
  } else if (isParams(params)) {
    checkedParams = params;
  } else if ('params' in msg) {
    return invalid();
  }

  // 2.0: a notification is a request without an `id` member (an explicit null id is a request).
  // 1.0: a notification is a request whose id is null.
  const isNotification = version === '2.0' ? !hasId : msg['id'] === null || !hasId;
  if (isNotification) return { kind: 'notification', version, method, params: checkedParams };
  return { kind: 'request', version, id: msg['id'] as RequestId, method, params: checkedParams };
}

function classifyResponse(
  msg: Record<string, unknown>,
  version: ProtocolVersion,
  raw: unknown,
): Incoming {
  if (!('id' in msg) || !isRequestId(msg['id'])) {
    return { kind: 'bad-response', reason: 'missing or invalid "id"', raw };
  }
  const id = msg['id'];
  if (version === '2.0') {
    const hasResult = 'result' in msg;
    const hasError = 'error' in msg;
    if (hasResult && hasError)
      return { kind: 'bad-response', reason: 'both "result" and "error"', raw };
    if (hasResult) return { kind: 'success', version, id, result: msg['result'] };
    if (!isErrorObject(msg['error']))
      return { kind: 'bad-response', reason: 'malformed "error"', raw };
    return { kind: 'failure', version, id, error: msg['error'] };
  }
  // 1.0 puts both members on every response; a non-null error wins.
  const error = msg['error'];
  if (error === null || error === undefined)
    return { kind: 'success', version, id, result: msg['result'] ?? null };
  const normalized: ErrorObject = isErrorObject(error)
    ? error
    : {
        code: ErrorCode.InternalError,
        message: typeof error === 'string' ? error : 'Error',
        data: error,
      };
  return { kind: 'failure', version, id, error: normalized };
}

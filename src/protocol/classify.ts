import { ErrorCode, defaultErrorMessage } from './error-codes.js';
import { isErrorObject } from './errors.js';
import { idTextsOf } from './id-text.js';
import { JsonRefusal, parseJson } from './safe-json.js';
import { isTraceparent } from './traceparent.js';
import type { ErrorObject, Params, ProtocolVersion, RequestId } from './types.js';

/** One incoming message, classified in a single pass. */
export type Incoming =
  | {
      kind: 'request';
      version: ProtocolVersion;
      id: RequestId;
      /**
       * The id's text as sent, when it is a number that String(id) would not write back the
       * same (12345678901234567890, 1.0, 1e2, -0, 1e400): the reply must carry this text.
       */
      idText?: string;
      method: string;
      params: Params | undefined;
      /** A valid W3C `traceparent` member of the request (see traceparent.ts); else absent. */
      traceparent?: string;
      /**
       * The request's `tracestate` member as sent, read only beside a valid `traceparent`; not
       * checked here (the browser client does not carry the check): the server takes it through
       * tracestateOf (IncomingDispatch), the client not at all.
       */
      tracestate?: unknown;
    }
  | { kind: 'notification'; version: ProtocolVersion; method: string; params: Params | undefined }
  | { kind: 'success'; version: ProtocolVersion; id: RequestId; result: unknown }
  | { kind: 'failure'; version: ProtocolVersion; id: RequestId; error: ErrorObject }
  /** Not a valid Request: answered with `error` under `id` (null when no id could be read). */
  | {
      kind: 'invalid';
      version: ProtocolVersion;
      id: RequestId;
      idText?: string;
      error: ErrorObject;
    }
  /**
   * A malformed Response: there is no one to answer. `id`, when it has a valid one: the call it
   * names is settled with the error (it will get no other answer), else it is only logged.
   */
  | { kind: 'bad-response'; reason: string; raw: unknown; id: RequestId | undefined };

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
  /** Deepest JSON nesting accepted; deeper is -32600 with `data: { maxDepth }`. Default Infinity. */
  maxDepth?: number;
  /**
   * Most JSON values one frame may hold (each object, array, string, number, true, false and
   * null counts one; keys do not); more is -32600 with `data: { maxJsonValues }`, counted on
   * the text before (and instead of) parsing it. Default Infinity.
   */
  maxJsonValues?: number;
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

/**
 * Parse the text of one frame and classify every message in it. Never throws.
 *
 * Text nested deeper than `maxDepth` is answered -32600 Invalid Request, `data: { maxDepth }`,
 * id null: the depth is measured on the raw text, before (and instead of) parsing, so the id is
 * never read. -32600 because such text is valid JSON (so not -32700) that this server does not
 * take as a Request; the specification has a code for that, and a code of our own (-32007, now
 * retired) told a generic client nothing it could act on. Text that is too deep and also not
 * valid JSON gets the same answer: telling the two apart would mean parsing it.
 *
 * Text holding more than `maxJsonValues` values is answered the same way, `data:
 * { maxJsonValues }`: counted in the same pass over the raw text, so it is never parsed.
 */
export function parseFrame(text: string, options: ClassifyOptions = {}): Frame {
  return parseFrameWith(text, options, idTextsOf);
}

/** How the numeric ids to echo as sent are found: idTextsOf, or idTextsByScan (id-text.ts). */
export type IdTextFinder = (text: string, value: unknown) => (string | undefined)[] | undefined;

/** parseFrame with the finder of id texts given (none: ids are echoed as parsed). */
export function parseFrameWith(
  text: string,
  options: ClassifyOptions,
  idTexts: IdTextFinder | undefined,
): Frame {
  const parsed = parseIncomingWith(text, options, idTexts);
  return 'kind' in parsed ? single(parsed) : parsed;
}

/**
 * parseFrameWith without a frame around a lone message: the message itself, or the frame of a
 * batch (or of the one error a bad batch is answered with). Never throws.
 */
export function parseIncomingWith(
  text: string,
  options: ClassifyOptions,
  idTexts: IdTextFinder | undefined,
): Incoming | Frame {
  const value = parseJson(text, options.maxDepth, options.maxJsonValues);
  if (value instanceof JsonRefusal) {
    return { kind: 'invalid', version: '2.0', id: null, error: refusalError(value, options) };
  }
  const texts = idTexts?.(text, value);
  return Array.isArray(value)
    ? classifyValue(value, options, texts)
    : classifyMessage(value, options.acceptV1 ?? false, texts?.[0]);
}

/** The error a text refused before or by parsing is answered with. */
function refusalError(refusal: JsonRefusal, options: ClassifyOptions): ErrorObject {
  switch (refusal.reason) {
    case 'depth':
      return errorObject(ErrorCode.InvalidRequest, { maxDepth: options.maxDepth });
    case 'values':
      return errorObject(ErrorCode.InvalidRequest, { maxJsonValues: options.maxJsonValues });
    case 'syntax':
      return errorObject(ErrorCode.ParseError);
  }
}

/**
 * Classify an already-parsed JSON value (one message or a batch). Never throws. `idTexts`
 * (from the text, see id-text.ts) gives, by message, the text of a numeric id to echo as sent.
 */
export function classifyValue(
  value: unknown,
  options: ClassifyOptions = {},
  idTexts?: readonly (string | undefined)[],
): Frame {
  if (!Array.isArray(value)) {
    return single(classifyMessage(value, options.acceptV1 ?? false, idTexts?.[0]));
  }
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
  for (let i = 0; i < value.length; i++) {
    messages[i] = classifyMessage(value[i], acceptV1, idTexts?.[i]);
  }
  return { batch: true, messages };
}

/**
 * Classify one message object (not a batch). `idText`: its numeric id as sent, when String()
 * would write it otherwise; with it, any JSON number is a valid id, even one beyond the range
 * of a double (1e400 reads as Infinity, and is answered as 1e400).
 */
export function classifyMessage(value: unknown, acceptV1: boolean, idText?: string): Incoming {
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
  // Only a number comes with an idText, and is valid with one even when not finite.
  const idValid = idText !== undefined || isRequestId(rawId);
  const idIfValid: RequestId = idValid ? (rawId as RequestId) : null;

  if (hasVersion ? msg['jsonrpc'] !== '2.0' : !acceptV1) {
    if (!('method' in msg) && ('result' in msg || 'error' in msg)) {
      return badResponse('missing or wrong "jsonrpc" member', value, rawId);
    }
    return invalidMessage('2.0', idIfValid, idText);
  }
  const version: ProtocolVersion = hasVersion ? '2.0' : '1.0';

  if ('method' in msg) return classifyCall(msg, version, idValid, idIfValid, idText);
  if ('result' in msg || 'error' in msg) return classifyResponse(msg, version, value);
  return invalidMessage(version, idIfValid, idText);
}

/** -32600 Invalid Request, answered under `id` (written as `idText` when there is one). */
function invalidMessage(
  version: ProtocolVersion,
  id: RequestId,
  idText: string | undefined,
): Incoming {
  const error = errorObject(ErrorCode.InvalidRequest);
  if (idText === undefined || id === null) return { kind: 'invalid', version, id, error };
  return { kind: 'invalid', version, id, idText, error };
}

function classifyCall(
  msg: Record<string, unknown>,
  version: ProtocolVersion,
  idValid: boolean,
  idIfValid: RequestId,
  idText: string | undefined,
): Incoming {
  const method = msg['method'];
  const params = msg['params'];
  const hasId = 'id' in msg;
  const invalid = (): Incoming => invalidMessage(version, idIfValid, idText);
  if (typeof method !== 'string') return invalid();
  if (hasId && !idValid) return invalid();

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
  const id = msg['id'] as RequestId;
  const request: Incoming & { kind: 'request' } =
    idText === undefined
      ? { kind: 'request', version, id, method, params: checkedParams }
      : { kind: 'request', version, id, idText, method, params: checkedParams };
  // One property read; the member is added only when a client sent a valid one, and only then is
  // its tracestate read (the spec drops a tracestate whose traceparent it drops).
  const traceparent = msg['traceparent'];
  if (traceparent !== undefined && isTraceparent(traceparent)) {
    request.traceparent = traceparent;
    const tracestate = msg['tracestate'];
    if (tracestate !== undefined) request.tracestate = tracestate;
  }
  return request;
}

/** A malformed response, with its id when that is a valid one (see Incoming). */
function badResponse(reason: string, raw: unknown, id: unknown): Incoming {
  return { kind: 'bad-response', reason, raw, id: isRequestId(id) ? id : undefined };
}

function classifyResponse(
  msg: Record<string, unknown>,
  version: ProtocolVersion,
  raw: unknown,
): Incoming {
  if (!('id' in msg) || !isRequestId(msg['id'])) {
    return badResponse('missing or invalid "id"', raw, undefined);
  }
  const id = msg['id'];
  if (version === '2.0') {
    const hasResult = 'result' in msg;
    const hasError = 'error' in msg;
    if (hasResult && hasError) return badResponse('both "result" and "error"', raw, id);
    if (hasResult) return { kind: 'success', version, id, result: msg['result'] };
    if (!isErrorObject(msg['error'])) return badResponse('malformed "error"', raw, id);
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

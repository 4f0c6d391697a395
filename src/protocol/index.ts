export type * from './types.js';
export {
  ErrorCode,
  SERVER_ERROR_MIN,
  SERVER_ERROR_MAX,
  defaultErrorMessage,
} from './error-codes.js';
export type { ErrorCodeName } from './error-codes.js';
export {
  JsonRpcError,
  ParseError,
  InvalidRequestError,
  MethodNotFoundError,
  InvalidParamsError,
  InternalError,
  ServerError,
  toWireError,
  isErrorObject,
} from './errors.js';
export {
  RpcLocalError,
  ConnectionClosedError,
  TimeoutError,
  CancelledError,
  TooManyPendingCallsError,
  NotConnectedError,
  ReconnectFailedError,
} from './local-errors.js';
export { parseFrame, classifyValue, classifyMessage, isRequestId } from './classify.js';
export type { Incoming, Frame, ClassifyOptions } from './classify.js';
export { safeJsonParse, exceedsDepth } from './safe-json.js';
export { idTextsOf } from './id-text.js';
export {
  encodeSuccess,
  encodeFailure,
  encodeRequest,
  encodeNotification,
  encodeBatch,
  encodeId,
  withIdText,
} from './encode.js';
export { RESERVED_PREFIX, ReservedMethod, isReservedMethod } from './reserved.js';
export {
  DEFAULT_SUBSCRIPTION_METHODS,
  decodeSubscriptionNotification,
  isSubscriptionId,
} from './subscription-frames.js';
export type {
  SubscriptionMethodNames,
  SubscriptionId,
  SubscriptionUpdate,
  SubscriptionNotification,
} from './subscription-frames.js';

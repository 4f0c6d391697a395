/**
 * Error codes used on the wire. The first five are the specification's own;
 * the rest sit in the range it leaves to implementations (-32000..-32099).
 */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,

  /** Too many calls in flight on this connection; retry later. */
  ServerBusy: -32000,
  /** The caller cancelled the request (rpc.cancel) before it finished. */
  RequestCancelled: -32001,
  /** A batch longer than the server's limit. */
  BatchTooLarge: -32002,
  /** The per-connection rate limit was exceeded. */
  RateLimited: -32003,
  /** The session may not call this method or subscribe to this topic. */
  Unauthorized: -32004,
  /** The connection already holds its maximum number of subscriptions. */
  TooManySubscriptions: -32005,
  /** The server is shutting down and takes no new work. */
  ShuttingDown: -32006,
  /**
   * Retired: no longer sent. JSON nested deeper than `maxDepth` is answered -32600 Invalid
   * Request with `data: { maxDepth }`, the specification's code for valid JSON that is not a
   * Request this server takes. Kept, and not given another meaning, for peers that still send it.
   * @deprecated Match `InvalidRequest` (with `data.maxDepth`) instead.
   */
  TooDeep: -32007,
  /** The requested operation needs a transport this one is not (e.g. subscribe over HTTP). */
  UnsupportedTransport: -32008,
  /** The broker (Redis, NATS) is unreachable: the publish was not taken. */
  BrokerUnavailable: -32009,
  /**
   * Credentials missing, refused or expired (`data.reason` says which). Unlike -32004, the
   * session's identity is not known or no longer valid: presenting a token may help.
   */
  Unauthenticated: -32010,
  /**
   * Gateway mode: the upstream a method is routed to could not be reached or did not answer with
   * a JSON-RPC response (refused, reset, closed mid-response, a non-2xx status, a body that is not
   * a response, a reply too large). `data: { upstream, reason }`.
   */
  UpstreamUnavailable: -32011,
  /** Gateway mode: the upstream did not answer within the route's timeout. `data: { upstream, reason }`. */
  UpstreamTimeout: -32012,
  /**
   * Gateway mode: the upstream's route already has `maxConcurrent` calls in flight; refused at
   * once, nothing queued. `data: { upstream, reason }`.
   */
  UpstreamBusy: -32013,
} as const;

export type ErrorCodeName = keyof typeof ErrorCode;

export const SERVER_ERROR_MIN = -32099;
export const SERVER_ERROR_MAX = -32000;

const codes = /* @__PURE__ */ Object.values(ErrorCode);

/**
 * The default message for each code, used when a handler gives none: in the order of
 * `ErrorCode`, as one text (the browser client carries it; test/protocol/error-messages.test.ts
 * pins each code's message).
 */
export const defaultErrorMessage: Readonly<Record<number, string>> =
  /* @__PURE__ */ Object.fromEntries(
    'Parse error|Invalid Request|Method not found|Invalid params|Internal error|Server busy|Request cancelled|Batch too large|Rate limit exceeded|Unauthorized|Too many subscriptions|Server shutting down|Message nested too deeply|Not supported on this transport|Broker unavailable|Unauthenticated|Upstream unavailable|Upstream timeout|Upstream busy'
      .split('|')
      .map((message, i): [number, string] => [codes[i]!, message]),
  );

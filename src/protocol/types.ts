/** Any value JSON can carry. */
export type JsonValue =
  string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** Spec 4: an id is a String, a Number or Null. */
export type RequestId = string | number | null;

/** Spec 4.2: params, when present, are structured: by position or by name. */
export type Params = readonly unknown[] | Readonly<Record<string, unknown>>;

/** Which dialect a peer spoke; replies are written in the same one. */
export type ProtocolVersion = '2.0' | '1.0';

export interface ErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

export interface RequestMessage {
  jsonrpc: '2.0';
  method: string;
  params?: Params;
  id: RequestId;
}

export interface NotificationMessage {
  jsonrpc: '2.0';
  method: string;
  params?: Params;
}

export interface SuccessResponse {
  jsonrpc: '2.0';
  result: unknown;
  id: RequestId;
}

export interface ErrorResponse {
  jsonrpc: '2.0';
  error: ErrorObject;
  id: RequestId;
}

export type ResponseMessage = SuccessResponse | ErrorResponse;
export type Message = RequestMessage | NotificationMessage | ResponseMessage;

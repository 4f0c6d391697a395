// Errors across a MessagePort. Structured cloning keeps an Error's message but not its class
// or fields (a JsonRpcError's code and data, a TimeoutError's method), so each error crosses
// as a plain object and is rebuilt on the other side as the class the caller would have got
// from a client of its own.
import { AuthenticationError } from '../authentication.js';
import { JsonRpcError } from '../../protocol/errors.js';
import {
  CancelledError,
  ConnectionClosedError,
  NotConnectedError,
  ReconnectFailedError,
  TimeoutError,
  TooManyPendingCallsError,
} from '../../protocol/local-errors.js';
import type { ErrorObject } from '../../protocol/types.js';

type Fields = Record<string, string | number | boolean | undefined>;

export type WireError =
  { rpc: ErrorObject; method?: string } | { name: string; message: string; fields: Fields };

/** The fields of the local errors that say more than the message. */
const fieldNames = [
  'closeCode',
  'closeReason',
  'method',
  'timeoutMs',
  'sent',
  'lastFailure',
  'attempts',
  'limit',
  'code',
  'status',
  'reason',
];

const revivers: Record<string, (message: string, f: Fields) => Error> = {
  ConnectionClosedError: (m, f) =>
    new ConnectionClosedError(m, f.closeCode as number, f.closeReason as string),
  TimeoutError: (_m, f) =>
    new TimeoutError(
      f.method as string,
      f.timeoutMs as number,
      f.sent !== false,
      f.lastFailure as string | undefined,
    ),
  CancelledError: (_m, f) => new CancelledError(f.method as string),
  TooManyPendingCallsError: (_m, f) => new TooManyPendingCallsError(f.limit as number),
  NotConnectedError: (m) => new NotConnectedError(m),
  ReconnectFailedError: (_m, f) =>
    new ReconnectFailedError(f.attempts as number, f.lastFailure as string | undefined),
  // A refused argument (authenticate() with neither a token nor a getToken, a bad option).
  TypeError: (m) => new TypeError(m),
  RangeError: (m) => new RangeError(m),
  AuthenticationError: (m, f) =>
    new AuthenticationError(m, f.code as number, f.status as number, f.reason as string),
};

export function toWire(error: unknown): WireError {
  if (error instanceof JsonRpcError) {
    // Data that cannot be cloned would fail the whole message: keep it only as JSON.
    const rpc = error.toErrorObject();
    if (rpc.data !== undefined) rpc.data = jsonCopy(rpc.data);
    return error.method === undefined ? { rpc } : { rpc, method: error.method };
  }
  const e = error instanceof Error ? error : new Error(String(error));
  const fields: Fields = {};
  const source = e as unknown as Record<string, unknown>;
  for (const name of fieldNames) {
    const value = source[name];
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') {
      fields[name] = value;
    }
  }
  return { name: e.name, message: e.message, fields };
}

export function fromWire(wire: WireError): Error {
  if ('rpc' in wire) {
    const error = JsonRpcError.fromErrorObject(wire.rpc);
    if (wire.method !== undefined) error.method = wire.method;
    return error;
  }
  const revive = revivers[wire.name];
  if (revive) return revive(wire.message, wire.fields);
  const error = new Error(wire.message);
  error.name = wire.name;
  return error;
}

function jsonCopy(value: unknown): unknown {
  try {
    return JSON.parse(JSON.stringify(value)) as unknown;
  } catch {
    return undefined;
  }
}

import { paramsTextOf } from '../protocol/params-text.js';
import type { Params } from '../protocol/types.js';
import type { UpstreamRequest } from './upstream-endpoint.js';

/**
 * The JSON-RPC 2.0 request an upstream receives, as text: `{"jsonrpc":"2.0","method":...,
 * "params":...,"id":...}`, params and id left out when there are none. Written straight to a
 * string: the same text as JSON.stringify of that object, without making the object, except
 * for params holding a number JSON.stringify would write otherwise (past 2^53, beyond a
 * double's range, `1.0`, `-0`): those are written as the client sent them.
 */
export function requestText(request: Pick<UpstreamRequest, 'method' | 'params' | 'id'>): string {
  const params = request.params === undefined ? '' : `,"params":${paramsJson(request.params)}`;
  const id = request.id === undefined ? '' : `,"id":${request.id}`;
  return `{"jsonrpc":"2.0","method":${JSON.stringify(request.method)}${params}${id}}`;
}

function paramsJson(params: Params): string {
  return paramsTextOf(params) ?? JSON.stringify(params);
}

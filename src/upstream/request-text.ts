import type { UpstreamRequest } from './upstream-endpoint.js';

/**
 * The JSON-RPC 2.0 request an upstream receives, as text: `{"jsonrpc":"2.0","method":...,
 * "params":...,"id":...}`, params and id left out when there are none. Written straight to a
 * string: the same text as JSON.stringify of that object, without making the object.
 */
export function requestText(request: Pick<UpstreamRequest, 'method' | 'params' | 'id'>): string {
  const params = request.params === undefined ? '' : `,"params":${JSON.stringify(request.params)}`;
  const id = request.id === undefined ? '' : `,"id":${request.id}`;
  return `{"jsonrpc":"2.0","method":${JSON.stringify(request.method)}${params}${id}}`;
}

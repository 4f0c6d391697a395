/**
 * What the JSON-RPC 2.0 specification's section 7 says each of its examples gets back, keyed
 * by the demo console's preset labels (demo/web/presets.ts holds the request texts, verbatim),
 * reduced to what the specification fixes: result or error code, and id. Batches compare as
 * sorted lists, since a batch's responses may come in any order.
 */
export function essence(reply: unknown): unknown {
  if (Array.isArray(reply)) return reply.map((r) => JSON.stringify(essence(r))).sort();
  const r = reply as { result?: unknown; error?: { code: number }; id: unknown; jsonrpc: string };
  return r.error
    ? { jsonrpc: r.jsonrpc, code: r.error.code, id: r.id }
    : { jsonrpc: r.jsonrpc, result: r.result, id: r.id };
}

const ok = (result: unknown, id: unknown) => ({ jsonrpc: '2.0', result, id });
const err = (code: number, id: unknown) => ({ jsonrpc: '2.0', code, id });
const batch = (...replies: unknown[]) => replies.map((x) => JSON.stringify(x)).sort();

export const NO_REPLY = 'no reply';

export const expectedReplies: Readonly<Record<string, unknown>> = {
  'positional parameters': ok(19, 1),
  'positional parameters, swapped': ok(-19, 2),
  'named parameters': ok(19, 3),
  'named parameters, reordered': ok(19, 4),
  'a notification': NO_REPLY,
  'a notification, no params': NO_REPLY,
  'non-existent method': err(-32601, '1'),
  'invalid JSON': err(-32700, null),
  'invalid Request object': err(-32600, null),
  'batch, invalid JSON': err(-32700, null),
  'empty array': err(-32600, null),
  'invalid batch (but not empty)': batch(err(-32600, null)),
  'invalid batch': batch(err(-32600, null), err(-32600, null), err(-32600, null)),
  batch: batch(ok(7, '1'), ok(19, '2'), err(-32600, null), err(-32601, '5'), ok(['hello', 5], '9')),
  'batch of notifications only': NO_REPLY,
};

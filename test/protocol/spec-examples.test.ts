import { describe, it, expect } from 'vitest';
import { createRawPeer } from '../support/peers.js';

/** Parse one frame of wire text. */
const json = (text: string): unknown => JSON.parse(text);

/**
 * Every example of section 7 of the JSON-RPC 2.0 specification
 * (https://www.jsonrpc.org/specification#examples), request text verbatim,
 * fed to a Peer as raw frames.
 */

interface Example {
  name: string;
  request: string;
  /** The spec's reply, as JSON text; `null` for "no reply". */
  reply: string | null;
}

const examples: Example[] = [
  {
    name: 'rpc call with positional parameters (1)',
    request: '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}',
    reply: '{"jsonrpc": "2.0", "result": 19, "id": 1}',
  },
  {
    name: 'rpc call with positional parameters (2)',
    request: '{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}',
    reply: '{"jsonrpc": "2.0", "result": -19, "id": 2}',
  },
  {
    name: 'rpc call with named parameters (1)',
    request:
      '{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}',
    reply: '{"jsonrpc": "2.0", "result": 19, "id": 3}',
  },
  {
    name: 'rpc call with named parameters (2)',
    request:
      '{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}',
    reply: '{"jsonrpc": "2.0", "result": 19, "id": 4}',
  },
  {
    name: 'a Notification (registered method)',
    request: '{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}',
    reply: null,
  },
  {
    name: 'a Notification (unknown method)',
    request: '{"jsonrpc": "2.0", "method": "foobar"}',
    reply: null,
  },
  {
    name: 'rpc call of non-existent method',
    request: '{"jsonrpc": "2.0", "method": "foobar", "id": "1"}',
    reply:
      '{"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "1"}',
  },
  {
    name: 'rpc call with invalid JSON',
    request: '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]',
    reply: '{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": null}',
  },
  {
    name: 'rpc call with invalid Request object',
    request: '{"jsonrpc": "2.0", "method": 1, "params": "bar"}',
    reply:
      '{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}',
  },
  {
    name: 'rpc call Batch, invalid JSON',
    request: `[
  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
  {"jsonrpc": "2.0", "method"
]`,
    reply: '{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": null}',
  },
  {
    name: 'rpc call with an empty Array',
    request: '[]',
    reply:
      '{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}',
  },
  {
    name: 'rpc call with an invalid Batch (but not empty)',
    request: '[1]',
    reply: `[
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}
]`,
  },
  {
    name: 'rpc call with invalid Batch',
    request: '[1,2,3]',
    reply: `[
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}
]`,
  },
  {
    name: 'rpc call Batch',
    request: `[
        {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
    ]`,
    reply: `[
        {"jsonrpc": "2.0", "result": 7, "id": "1"},
        {"jsonrpc": "2.0", "result": 19, "id": "2"},
        {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
        {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "5"},
        {"jsonrpc": "2.0", "result": ["hello", 5], "id": "9"}
    ]`,
  },
  {
    name: 'rpc call Batch (all notifications)',
    request: `[
        {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
    ]`,
    reply: null,
  },
];

const PROBE = '{"jsonrpc":"2.0","method":"rpc.ping","id":"probe"}';

function specPeer() {
  const raw = createRawPeer();
  const calls: { method: string; params: unknown }[] = [];
  const record = (method: string, params: unknown): void => {
    calls.push({ method, params });
  };
  raw.peer.registry.method('subtract', (params: unknown) => {
    record('subtract', params);
    if (Array.isArray(params)) return (params[0] as number) - (params[1] as number);
    const named = params as { minuend: number; subtrahend: number };
    return named.minuend - named.subtrahend;
  });
  raw.peer.registry.method('sum', (params: unknown) => {
    record('sum', params);
    return (params as number[]).reduce((a, b) => a + b, 0);
  });
  raw.peer.registry.method('update', (params: unknown) => {
    record('update', params);
    return null;
  });
  raw.peer.registry.method('notify_hello', (params: unknown) => {
    record('notify_hello', params);
    return null;
  });
  raw.peer.registry.method('get_data', (params: unknown) => {
    record('get_data', params);
    return ['hello', 5];
  });
  return { ...raw, calls };
}

/** Sort batch replies by id, as the spec lets a server answer in any order. */
function byId(items: unknown[]): unknown[] {
  return [...items].sort((x, y) =>
    JSON.stringify((x as { id: unknown }).id).localeCompare(
      JSON.stringify((y as { id: unknown }).id),
    ),
  );
}

describe('JSON-RPC 2.0 specification, section 7 examples', () => {
  it.each(examples)('$name', async ({ request, reply }) => {
    const raw = specPeer();
    const { received } = raw;
    const frames = await raw.send(request);
    if (reply === null) {
      expect(frames).toEqual([]);
      // Nothing arrives late either: the next frame is the answer to a probe.
      const probe = await raw.send(PROBE);
      expect(probe.map(json)).toEqual([{ jsonrpc: '2.0', result: 'pong', id: 'probe' }]);
      expect(received).toHaveLength(1);
      return;
    }
    expect(frames).toHaveLength(1);
    const got: unknown = JSON.parse(frames[0]!);
    const want: unknown = JSON.parse(reply);
    expect(Array.isArray(got)).toBe(Array.isArray(want));
    if (Array.isArray(want)) {
      // The spec allows any order; compare as sets, then check our own (request) order.
      expect(byId(got as unknown[])).toEqual(byId(want));
      expect(got).toEqual(want);
    } else {
      expect(got).toEqual(want);
    }
  });

  it('runs the handler of a notification with its params', async () => {
    const raw = specPeer();
    const { calls } = raw;
    await raw.send('{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}');
    expect(calls).toEqual([{ method: 'update', params: [1, 2, 3, 4, 5] }]);
  });

  it('runs every valid member of the mixed batch exactly once', async () => {
    const batch = examples.find((e) => e.name === 'rpc call Batch')!;
    const raw = specPeer();
    const { calls } = raw;
    await raw.send(batch.request);
    expect(calls).toEqual([
      { method: 'sum', params: [1, 2, 4] },
      { method: 'notify_hello', params: [7] },
      { method: 'subtract', params: [42, 23] },
      { method: 'get_data', params: undefined },
    ]);
  });

  it('runs the notification handlers of an all-notification batch', async () => {
    const batch = examples.find((e) => e.name === 'rpc call Batch (all notifications)')!;
    const raw = specPeer();
    const { calls } = raw;
    const frames = await raw.send(batch.request);
    expect(frames).toEqual([]);
    expect(calls).toEqual([{ method: 'notify_hello', params: [7] }]);
  });

  it('does not run any handler for a batch that is not valid JSON', async () => {
    const batch = examples.find((e) => e.name === 'rpc call Batch, invalid JSON')!;
    const raw = specPeer();
    const { calls } = raw;
    await raw.send(batch.request);
    expect(calls).toEqual([]);
  });

  it('answers the empty array with a single object, not an array', async () => {
    const raw = specPeer();
    const frames = await raw.send('[]');
    expect(frames).toHaveLength(1);
    expect(frames[0]!.trimStart().startsWith('{')).toBe(true);
    expect(Array.isArray(JSON.parse(frames[0]!))).toBe(false);
  });

  it('answers a non-empty invalid batch with an array', async () => {
    const raw = specPeer();
    const frames = await raw.send('[1]');
    expect(frames).toHaveLength(1);
    expect(Array.isArray(JSON.parse(frames[0]!))).toBe(true);
  });

  it('notifies subscribers of incoming notifications, even for unknown methods', async () => {
    const raw = specPeer();
    const { peer } = raw;
    const seen: unknown[] = [];
    const sub = peer.notifications$.subscribe((n) => seen.push(n));
    await raw.send('{"jsonrpc": "2.0", "method": "foobar"}');
    await raw.send('{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}');
    sub.unsubscribe();
    expect(seen).toEqual([
      { method: 'foobar', params: undefined },
      { method: 'update', params: [1, 2, 3, 4, 5] },
    ]);
  });
});

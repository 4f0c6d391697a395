/**
 * The examples of the JSON-RPC 2.0 specification, section 7, as the console's presets:
 * the text is sent exactly as written (including the invalid ones).
 */
export const specExamples: readonly { label: string; text: string }[] = [
  {
    label: 'positional parameters',
    text: '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}',
  },
  {
    label: 'positional parameters, swapped',
    text: '{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}',
  },
  {
    label: 'named parameters',
    text: '{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}',
  },
  {
    label: 'named parameters, reordered',
    text: '{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}',
  },
  {
    label: 'a notification',
    text: '{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}',
  },
  { label: 'a notification, no params', text: '{"jsonrpc": "2.0", "method": "foobar"}' },
  {
    label: 'non-existent method',
    text: '{"jsonrpc": "2.0", "method": "foobar", "id": "1"}',
  },
  {
    label: 'invalid JSON',
    text: '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]',
  },
  {
    label: 'invalid Request object',
    text: '{"jsonrpc": "2.0", "method": 1, "params": "bar"}',
  },
  {
    label: 'batch, invalid JSON',
    text: '[\n  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},\n  {"jsonrpc": "2.0", "method"\n]',
  },
  { label: 'empty array', text: '[]' },
  { label: 'invalid batch (but not empty)', text: '[1]' },
  { label: 'invalid batch', text: '[1,2,3]' },
  {
    label: 'batch',
    text: [
      '[',
      '  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},',
      '  {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},',
      '  {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},',
      '  {"foo": "boo"},',
      '  {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},',
      '  {"jsonrpc": "2.0", "method": "get_data", "id": "9"}',
      ']',
    ].join('\n'),
  },
  {
    label: 'batch of notifications only',
    text: [
      '[',
      '  {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},',
      '  {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}',
      ']',
    ].join('\n'),
  },
];

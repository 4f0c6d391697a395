/**
 * A routed result holding a key the gateway strips when it parses (`__proto__`, a `constructor`
 * holding a `prototype`) and a number a double does not hold exactly (12345678901234567890,
 * 1.10): the client's reply carries the upstream's text without those keys, its numbers as
 * written, as it carries a result without such keys (results-as-sent.test.ts). Neither the
 * stripped keys nor the reply reach Object.prototype.
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withoutStrippedMembers } from '../../src/encoding/proto-keys.js';
import { parseJson } from '../../src/protocol/safe-json.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

/** The results the upstream answers, by method, as JSON text written by hand. */
const RESULTS: Record<string, string> = {
  'orders.proto': '{"__proto__":{"polluted":true},"account":12345678901234567890,"rate":1.10}',
  'orders.escaped': '{"account":12345678901234567890, "\\u005f_proto__" : {"polluted":true}}',
  'orders.nested':
    '[{"a":1.10,"__proto__":[1]},{"constructor":{"prototype":{"polluted":true}},"n":-0}]',
  'orders.constructor': '{"constructor":{"name":"kept"},"big":18446744073709551617}',
  'orders.duplicates':
    '{"__proto__":1,"x":1.50,"__proto__":2,"constructor":3,"constructor":{"prototype":1}}',
};

let upstream: Server;
let running: RoutedGateway;

beforeAll(async () => {
  // Answers each request with its method's result, written as the text above.
  upstream = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const { id, method } = JSON.parse(body) as { id: number; method: string };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`{"jsonrpc":"2.0","id":${id},"result":${RESULTS[method] ?? 'null'}}`);
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  running = await startRoutedGateway({
    upstreams: { orders: { url: `http://127.0.0.1:${port}/rpc` } },
    methods: { 'orders.*': 'orders' },
  });
});

afterAll(async () => {
  await running?.close();
  await new Promise((resolve) => upstream?.close(resolve));
});

/** The text of the reply to a call of `method` (id 1) over a plain WebSocket. */
async function replyText(method: string): Promise<string> {
  const socket = new WebSocket(running.url);
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  const reply = new Promise<string>((resolve) =>
    socket.once('message', (data: Buffer) => resolve(data.toString())),
  );
  socket.send(`{"jsonrpc":"2.0","id":1,"method":"${method}"}`);
  try {
    return await reply;
  } finally {
    socket.close();
  }
}

const answer = (result: string) => `{"jsonrpc":"2.0","result":${result},"id":1}`;

describe('a routed result holding a key the parse strips', () => {
  it('reaches the client without the key, its numbers as the upstream wrote them', async () => {
    expect(await replyText('orders.proto')).toBe(
      answer('{"account":12345678901234567890,"rate":1.10}'),
    );
  });

  it('drops the key spelled with escapes, keeping the rest of the text', async () => {
    expect(await replyText('orders.escaped')).toBe(answer('{"account":12345678901234567890}'));
  });

  it('drops such keys at any depth, and a constructor holding a prototype', async () => {
    expect(await replyText('orders.nested')).toBe(answer('[{"a":1.10},{"n":-0}]'));
  });

  it('keeps a constructor that holds no prototype', async () => {
    expect(await replyText('orders.constructor')).toBe(
      answer('{"constructor":{"name":"kept"},"big":18446744073709551617}'),
    );
  });

  it('drops every duplicate of a stripped key, as the parse keeps the last', async () => {
    expect(await replyText('orders.duplicates')).toBe(answer('{"x":1.50}'));
  });

  it('pollutes nothing', async () => {
    for (const method of Object.keys(RESULTS)) await replyText(method);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('polluted');
  });
});

describe('withoutStrippedMembers', () => {
  it('returns a text holding no such key as it is, whitespace included', () => {
    const text = '{ "a" : [1.0, {"b": "__proto__"}], "prototype": 2 }';
    expect(withoutStrippedMembers(text)).toBe(text);
  });

  it('reads as JSON.parse reads the text, with the keys stripped', () => {
    const text =
      '{"k":{"__proto__":{"x":1},"constructor":{"prototype":0},"v":[{"__proto__":0}]},"z":"\\"}"}';
    const out = withoutStrippedMembers(text);
    expect(out).toBe('{"k":{"v":[{}]},"z":"\\"}"}');
    expect(JSON.parse(out)).toEqual({ k: { v: [{}] }, z: '"}' });
  });

  it('reads as the value parseJson makes, for any text of such keys', () => {
    const key = fc.constantFrom(
      '"__proto__"',
      '"\\u005f_proto__"',
      '"constructor"',
      '"prototype"',
      '"\\u0070rototype"',
      '"a"',
    );
    const { value } = fc.letrec<{ value: string; array: string; object: string }>((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        fc.constantFrom('1.10', '-0', '12345678901234567890', '"s"', 'null'),
        tie('array'),
        tie('object'),
      ),
      array: fc.array(tie('value'), { maxLength: 4 }).map((items) => `[${items.join(', ')}]`),
      object: fc
        .array(fc.tuple(key, tie('value')), { maxLength: 4 })
        .map((members) => `{ ${members.map(([k, v]) => `${k} : ${v}`).join(' ,')} }`),
    }));
    fc.assert(
      fc.property(value, (text) => {
        const out = withoutStrippedMembers(text);
        expect(JSON.stringify(JSON.parse(out))).toBe(JSON.stringify(parseJson(text)));
      }),
      { numRuns: 500 },
    );
  });
});

/**
 * A peer's id comes back exactly as it was sent (spec 5: "It MUST be the same as the value of
 * the id member in the Request Object"). JSON.parse reads numbers as doubles, so numeric ids the
 * double does not hold as written (12345678901234567890, 1.0, 1e2, -0, 1e400) are echoed from
 * the message text. String ids are echoed as the same string (written as JSON.stringify writes
 * it: `"\u0041"` comes back as `"A"`, the same value).
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { parseFrame } from '../../src/protocol/classify.js';
import { idTextsOf, scanIdTexts } from '../../src/protocol/id-text.js';
import { Resources } from '../support/resources.js';
import { createRawPeer } from '../support/peers.js';
import { jsonNumberText } from '../support/jsonrpc-arbitraries.js';

const ids = (text: string) => idTextsOf(text, JSON.parse(text));

describe('idTextsOf', () => {
  it('is undefined on the common path: string ids, plain safe integers, responses, no id', () => {
    for (const text of [
      '{"jsonrpc":"2.0","method":"m","id":"abc"}',
      '{"jsonrpc":"2.0","method":"m","id":7}',
      '{"id":7,"jsonrpc":"2.0","method":"m","params":[1.5,2e3]}',
      '{"jsonrpc": "2.0", "method": "m", "params": {"id": 1.0}, "id": 1}',
      '{"jsonrpc":"2.0","method":"m"}',
      '{"jsonrpc":"2.0","result":1,"id":12345678901234567890}',
      '[{"jsonrpc":"2.0","method":"m","id":1},{"jsonrpc":"2.0","method":"m","id":"x"}]',
    ]) {
      expect(ids(text), text).toBeUndefined();
    }
  });

  it.each([
    ['12345678901234567890', 'last'],
    ['-9007199254740993', 'last'],
    ['1.0', 'last'],
    ['1E+2', 'first'],
    ['-0', 'middle'],
    ['1e400', 'first'],
    ['2.50', 'middle'],
    ['1.5e-400', 'last'],
  ])('finds %s as the %s member', (raw, where) => {
    const members = ['"jsonrpc": "2.0"', '"method":"m"', '"params":{"id":5,"x":[{"id":2.5}]}'];
    const at = where === 'first' ? 0 : where === 'middle' ? 2 : members.length;
    members.splice(at, 0, `"id" :\t${raw}`);
    const text = `{ ${members.join(' , ')} }`;
    expect(ids(text)).toEqual([raw]);
  });

  it('reads a key spelled with escapes, and the last of duplicate ids, as JSON.parse does', () => {
    expect(ids('{"jsonrpc":"2.0","method":"m","\\u0069d":1.0}')).toEqual(['1.0']);
    expect(ids('{"jsonrpc":"2.0","\\u0069\\u0064":1e1,"method":"m"}')).toEqual(['1e1']);
    expect(ids('{"id":"s","jsonrpc":"2.0","method":"m","id":2.50}')).toEqual(['2.50']);
    expect(ids('{"id":2.50,"jsonrpc":"2.0","method":"m","id":3.0}')).toEqual(['3.0']);
    // A key that ends in `id` is not "id".
    expect(ids('{"jsonrpc":"2.0","method":"m","id":1.0,"x\\"id":2}')).toEqual(['1.0']);
  });

  it('gives each batch member its own id text, by position', () => {
    const text =
      '[{"jsonrpc":"2.0","method":"m","id":1.0},"x",{"jsonrpc":"2.0","method":"m","id":2},' +
      '{"jsonrpc":"2.0","method":"m","params":[{"id":9.0}]},{"id":12345678901234567890,"method":"m","jsonrpc":"2.0"}]';
    const found = ids(text)!;
    expect(found).toHaveLength(5);
    expect([...found]).toEqual(['1.0', undefined, undefined, undefined, '12345678901234567890']);
  });

  it('scanIdTexts skips strings that look like members', () => {
    const text = '{"method":"\\"id\\":1.0,","params":["\\"id\\":2.0"],"id":3.0}';
    expect(scanIdTexts(text, false)).toEqual(['3.0']);
  });
});

describe('parseFrame: ids kept as sent', () => {
  it('accepts any JSON number as an id, 1e400 included, with its text', () => {
    const [message] = parseFrame('{"jsonrpc":"2.0","method":"m","id":1e400}').messages;
    expect(message).toMatchObject({ kind: 'request', id: Infinity, idText: '1e400' });
  });

  it('an invalid message is answered under its id text', () => {
    const [message] = parseFrame('{"jsonrpc":"2.0","method":1,"id":12345678901234567890}').messages;
    expect(message).toMatchObject({ kind: 'invalid', idText: '12345678901234567890' });
  });
});

// ---------------------------------------------------------------------------------------------
// Property: whatever id text a request carries, the reply carries the same text.

const idText: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: jsonNumberText, weight: 4 },
  { arbitrary: fc.maxSafeInteger().map(String), weight: 2 },
  {
    arbitrary: fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
    weight: 2,
  },
  { arbitrary: fc.string({ maxLength: 12 }).map((s) => JSON.stringify(s)), weight: 2 },
  {
    arbitrary: fc.constantFrom(
      '12345678901234567890',
      '1.0',
      '1e2',
      '-0',
      '1e400',
      '-1E-400',
      '9007199254740993',
    ),
    weight: 1,
  },
);

const space = fc.constantFrom('', ' ', '\n  ', '\t');

/** Params that may hold members named "id" with numbers of their own (decoys). */
const params = fc.oneof(
  fc.constant(undefined),
  fc.constant('[]'),
  jsonNumberText.map((n) => `{"id":${n}}`),
  jsonNumberText.map((n) => `[{"id": ${n}, "x": "\\"id\\":${n}"}, ${n}]`),
);

type Kind = 'ok' | 'missing' | 'invalid';

interface Case {
  id: string;
  kind: Kind;
  text: string;
  /** The exact reply text this request gets. */
  reply: string;
}

const RESULT = '"ok"';

function replyFor(kind: Kind, id: string): string {
  const idPart = `"id":${id.startsWith('"') ? JSON.stringify(JSON.parse(id)) : id}`;
  switch (kind) {
    case 'ok':
      return `{"jsonrpc":"2.0","result":${RESULT},${idPart}}`;
    case 'missing':
      return `{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},${idPart}}`;
    case 'invalid':
      return `{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},${idPart}}`;
  }
}

const request: fc.Arbitrary<Case> = fc
  .record({
    id: idText,
    kind: fc.constantFrom<Kind>('ok', 'ok', 'missing', 'invalid'),
    params,
    at: fc.nat(),
    s1: space,
    s2: space,
    order: fc.boolean(),
  })
  .map(({ id, kind, params: p, at, s1, s2, order }) => {
    const method = kind === 'ok' ? '"ok"' : kind === 'missing' ? '"nope"' : '1';
    const members = [`"jsonrpc":${s1}"2.0"`, `"method":${method}`];
    if (p !== undefined) members.push(`"params":${s2}${p}`);
    if (order) members.reverse();
    members.splice(at % (members.length + 1), 0, `"id"${s1}:${s2}${id}`);
    return { id, kind, text: `{${s1}${members.join(`,${s2}`)}${s2}}`, reply: replyFor(kind, id) };
  });

/** A single request, or a batch of them (answered in order: the handler is synchronous). */
const frame = fc.oneof(
  request.map((c) => ({ text: c.text, reply: c.reply })),
  fc.array(request, { minLength: 1, maxLength: 5 }).map((cs) => ({
    text: `[${cs.map((c) => c.text).join(', ')}]`,
    reply: `[${cs.map((c) => c.reply).join(',')}]`,
  })),
);

function echoPeer() {
  const raw = createRawPeer();
  raw.peer.registry.method('ok', () => 'ok');
  return raw;
}

describe('property: the reply carries the id text the request carried', () => {
  it('over a peer, singles and batches, the id anywhere among decoys', async () => {
    const raw = echoPeer();
    await fc.assert(
      fc.asyncProperty(frame, async ({ text, reply }) => {
        JSON.parse(text); // the generator makes valid JSON only
        const frames = await raw.send(text, 1);
        expect(frames).toEqual([reply]);
      }),
      { numRuns: 500 },
    );
  });

  it('async handlers and afterReply hooks keep the id text', async () => {
    const raw = createRawPeer();
    const after: string[] = [];
    raw.peer.registry.method('later', async () => {
      await new Promise((r) => setImmediate(r));
      return 1;
    });
    raw.peer.registry.method('hooked', (_p: unknown, ctx) => {
      ctx.afterReply(() => after.push('hook'));
      return 2;
    });
    const frames = await raw.send(
      '[{"jsonrpc":"2.0","method":"later","id":1.50},{"jsonrpc":"2.0","method":"hooked","id":-0}]',
      20,
    );
    expect(frames).toEqual([
      '[{"jsonrpc":"2.0","result":1,"id":1.50},{"jsonrpc":"2.0","result":2,"id":-0}]',
    ]);
    expect(after).toEqual(['hook']);
    const single = await raw.send('{"jsonrpc":"2.0","method":"later","id":1e400}', 20);
    expect(single).toEqual(['{"jsonrpc":"2.0","result":1,"id":1e400}']);
  });

  it('rpc.cancel finds a call by its id as parsed', async () => {
    const raw = createRawPeer();
    raw.peer.registry.method('wait', (_p: unknown, ctx) => {
      return new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('x')));
    });
    const pending = raw.send('{"jsonrpc":"2.0","method":"wait","id":12345678901234567890}', 2);
    await pending;
    const frames = await raw.send(
      '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":12345678901234567890}}',
      5,
    );
    expect(frames).toEqual([
      '{"jsonrpc":"2.0","error":{"code":-32001,"message":"Request cancelled"},"id":12345678901234567890}',
    ]);
  });
});

// ---------------------------------------------------------------------------------------------
// The same on a real socket, in the style of the specification's examples.

describe('over a real WebSocket', () => {
  const res = new Resources();
  afterEach(() => res.cleanup());

  const examples: { name: string; request: string; reply: string }[] = [
    {
      name: 'an integer beyond 2^53',
      request: '{"jsonrpc": "2.0", "method": "sum", "params": [1, 2], "id": 12345678901234567890}',
      reply: '{"jsonrpc":"2.0","result":3,"id":12345678901234567890}',
    },
    {
      name: 'a negative one, first',
      request: '{"id": -98765432109876543210, "jsonrpc": "2.0", "method": "sum", "params": [1]}',
      reply: '{"jsonrpc":"2.0","result":1,"id":-98765432109876543210}',
    },
    {
      name: 'a fraction (which the spec says SHOULD NOT be used, but is a Number)',
      request: '{"jsonrpc": "2.0", "method": "sum", "params": [2], "id": 1.0}',
      reply: '{"jsonrpc":"2.0","result":2,"id":1.0}',
    },
    {
      name: 'an exponent beyond the range of a double',
      request: '{"jsonrpc": "2.0", "method": "foobar", "id": 1e400}',
      reply: '{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":1e400}',
    },
    {
      name: 'an invalid Request object',
      request: '{"jsonrpc": "2.0", "method": 1, "params": "bar", "id": 9007199254740993}',
      reply:
        '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":9007199254740993}',
    },
    {
      name: 'a batch',
      request:
        '[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": 12345678901234567890},' +
        ' {"jsonrpc": "2.0", "method": "sum", "params": [5], "id": 5},' +
        ' {"jsonrpc": "2.0", "method": "sum", "params": [6], "id": "6"},' +
        ' {"jsonrpc": "2.0", "method": "sum", "params": [7], "id": -0}]',
      reply:
        '[{"jsonrpc":"2.0","result":7,"id":12345678901234567890},{"jsonrpc":"2.0","result":5,"id":5},' +
        '{"jsonrpc":"2.0","result":6,"id":"6"},{"jsonrpc":"2.0","result":7,"id":-0}]',
    },
  ];

  it.each(examples)('$name', async ({ request, reply }) => {
    const { url } = await res.demoGateway();
    const raw = await res.raw(url);
    raw.socket.send(request);
    const [frame] = await raw.waitFor(1);
    expect(frame).toBe(reply);
  });

  it('property, over one connection', async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('ok', () => 'ok');
    const raw = await res.raw(url);
    let seen = 0;
    await fc.assert(
      fc.asyncProperty(frame, async ({ text, reply }) => {
        raw.socket.send(text);
        const frames = await raw.waitFor(++seen);
        expect(frames[seen - 1]).toBe(reply);
      }),
      { numRuns: 100 },
    );
  });

  it('over HTTP POST too', async () => {
    const { url } = await res.demoGateway();
    const httpUrl = url.replace(/^ws/, 'http');
    const response = await fetch(httpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"jsonrpc":"2.0","method":"sum","params":[1],"id":12345678901234567890}',
    });
    expect(await response.text()).toBe('{"jsonrpc":"2.0","result":1,"id":12345678901234567890}');
  });
});

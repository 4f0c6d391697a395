import fc from 'fast-check';
import { describe, it, expect, afterEach, vi } from 'vitest';
import { exceedsDepth, safeJsonParse } from '../../src/protocol/safe-json.js';
import { parseFrame } from '../../src/protocol/classify.js';
import { stripped } from '../support/jsonrpc-model.js';
import { createRawPeer } from '../support/peers.js';

/** Parse one frame of wire text. */
const json = (text: string): unknown => JSON.parse(text);

function parsed(text: string, maxDepth?: number): unknown {
  const r = safeJsonParse(text, maxDepth);
  if (!r.ok) throw new Error(`expected ok, got ${r.reason}: ${r.message}`);
  return r.value;
}

/** Every own key of every object reachable from `value` (iterative walk). */
function allOwnKeys(value: unknown): string[] {
  const keys: string[] = [];
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object') continue;
    for (const key of Reflect.ownKeys(node)) {
      if (typeof key === 'string') keys.push(key);
      stack.push((node as Record<string, unknown>)[key as string]);
    }
  }
  return keys;
}

/** True when some object reachable from `value` has a `constructor` holding a `prototype`. */
function hasConstructorPrototype(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object') continue;
    if (Object.prototype.hasOwnProperty.call(node, 'constructor')) {
      const ctor = (node as Record<string, unknown>)['constructor'];
      if (ctor !== null && typeof ctor === 'object' && 'prototype' in ctor) return true;
    }
    for (const key of Object.keys(node)) stack.push((node as Record<string, unknown>)[key]);
  }
  return false;
}

function assertPrototypeClean(): void {
  const probe: Record<string, unknown> = {};
  expect(probe['polluted']).toBeUndefined();
  expect(Object.prototype).not.toHaveProperty('polluted');
  expect(Object.getOwnPropertyNames(Object.prototype)).not.toContain('polluted');
}

/** A naive recursive merge, as application code might write, to show what stripping protects. */
function naiveMerge(target: Record<string, unknown>, source: unknown): void {
  if (source === null || typeof source !== 'object') return;
  for (const key of Object.keys(source)) {
    const value = (source as Record<string, unknown>)[key];
    if (value !== null && typeof value === 'object') {
      if (target[key] === null || typeof target[key] !== 'object') target[key] = {};
      naiveMerge(target[key] as Record<string, unknown>, value);
    } else {
      target[key] = value;
    }
  }
}

afterEach(() => {
  // Never let a failed test leak pollution into later tests.
  delete (Object.prototype as Record<string, unknown>)['polluted'];
});

const hostile: [string, string][] = [
  ['top-level __proto__', '{"__proto__":{"polluted":true},"a":1}'],
  ['nested __proto__', '{"a":{"b":[{"c":{"__proto__":{"polluted":true}}}]}}'],
  [
    '__proto__ inside params',
    '{"jsonrpc":"2.0","method":"m","params":{"__proto__":{"polluted":1}},"id":1}',
  ],
  ['constructor.prototype', '{"constructor":{"prototype":{"polluted":true}}}'],
  ['nested constructor.prototype', '{"x":[{"y":{"constructor":{"prototype":{"polluted":1}}}}]}'],
  [
    'both, in a batch',
    '[{"__proto__":{"polluted":1}},{"constructor":{"prototype":{"polluted":1}}}]',
  ],
  ['escaped __proto__ key', '{"\\u005f_proto__":{"polluted":true}}'],
  ['escaped constructor key', '{"constr\\u0075ctor":{"prototype":{"polluted":true}}}'],
  [
    'fully escaped __proto__ key',
    '{"a":{"\\u005f\\u005f\\u0070roto\\u005f\\u005f":{"polluted":1}}}',
  ],
];

describe('safeJsonParse: prototype pollution', () => {
  it.each(hostile)('strips %s', (_label, text) => {
    const value = parsed(text);
    expect(allOwnKeys(value)).not.toContain('__proto__');
    expect(hasConstructorPrototype(value)).toBe(false);
  });

  it.each(hostile)('leaves Object.prototype clean after parse and merge (%s)', (_label, text) => {
    const value = parsed(text);
    const assigned: Record<string, unknown> = Object.assign({}, value);
    expect(Object.getPrototypeOf(assigned)).toBe(Object.prototype);
    expect(assigned['polluted']).toBeUndefined();
    naiveMerge({}, value);
    if (Array.isArray(value)) for (const item of value) naiveMerge({}, item);
    assertPrototypeClean();
  });

  it('keeps the other keys next to a stripped one', () => {
    expect(parsed('{"__proto__":{"x":1},"a":1,"b":{"__proto__":[],"c":2}}')).toEqual({
      a: 1,
      b: { c: 2 },
    });
  });

  it('keeps a harmless constructor key (no prototype inside)', () => {
    expect(parsed('{"constructor":"Foo","k":{"constructor":{"name":"x"}}}')).toEqual({
      constructor: 'Foo',
      k: { constructor: { name: 'x' } },
    });
  });

  it('keeps the words as values', () => {
    expect(parsed('["__proto__","constructor",{"v":"__proto__"}]')).toEqual([
      '__proto__',
      'constructor',
      { v: '__proto__' },
    ]);
  });

  it('strips a __proto__ key at depth 10000', () => {
    const depth = 10_000;
    const text =
      '{"a":'.repeat(depth) + '{"__proto__":{"polluted":1},"leaf":1}' + '}'.repeat(depth);
    const value = parsed(text);
    let node = value as Record<string, unknown>;
    for (let i = 0; i < depth; i++) node = node['a'] as Record<string, unknown>;
    expect(node).toEqual({ leaf: 1 });
    expect(Object.prototype.hasOwnProperty.call(node, '__proto__')).toBe(false);
  });

  it.each([
    ['plain', '{"__proto__":{"polluted":1},"ok":2}'],
    ['unicode-escaped', '{"\\u005f_proto__":{"polluted":1},"ok":2}'],
  ])(
    'a handler merging its params never reaches Object.prototype (%s __proto__ key)',
    async (_label, params) => {
      const raw = createRawPeer();
      const seen: unknown[] = [];
      raw.peer.registry.method('merge', (p: unknown) => {
        seen.push(p);
        const target: Record<string, unknown> = {};
        naiveMerge(target, p);
        return Object.keys(target);
      });
      const frames = await raw.send(`{"jsonrpc":"2.0","method":"merge","params":${params},"id":1}`);
      expect(allOwnKeys(seen)).not.toContain('__proto__');
      assertPrototypeClean();
      expect(frames.map(json)).toEqual([{ jsonrpc: '2.0', result: ['ok'], id: 1 }]);
    },
  );

  it('model: whatever the keys and however they are spelled, no __proto__ key and no constructor holding a prototype is left, and nothing else is removed', () => {
    /** A key as itself or, with `escapes`, with some of its characters written as \u escapes. */
    const spelled = (key: string, escapes: boolean) =>
      (escapes
        ? fc.array(fc.boolean(), { minLength: key.length, maxLength: key.length })
        : fc.constant([] as boolean[])
      ).map((escape) =>
        [...key]
          .map((c, i) => (escape[i] ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}` : c))
          .join(''),
      );
    const keys = fc.constantFrom('__proto__', 'constructor', 'prototype', 'proto', 'a', 'b');
    const texts = (escapes: boolean) =>
      fc.letrec<{ text: string }>((tie) => ({
        // Mostly objects, so that a key is often followed by an object with keys of its own.
        text: fc.oneof(
          { maxDepth: 4, withCrossShrink: true },
          fc.constantFrom('1', '"x"', 'null', '"prototype"'),
          fc.array(tie('text'), { maxLength: 3 }).map((items) => `[${items.join(',')}]`),
          {
            weight: 3,
            arbitrary: fc
              .array(
                fc.tuple(
                  keys.chain((key) => spelled(key, escapes)),
                  tie('text'),
                ),
                {
                  maxLength: 3,
                },
              )
              .map((members) => `{${members.map(([k, v]) => `"${k}":${v}`).join(',')}}`),
          },
        ),
      })).text;
    const value = fc.oneof(texts(false), texts(true));
    fc.assert(
      fc.property(value, (text) => {
        const got = parsed(text);
        expect(allOwnKeys(got)).not.toContain('__proto__');
        expect(hasConstructorPrototype(got)).toBe(false);
        // What is left is JSON.parse's value with exactly the dangerous keys stripped.
        const expected = JSON.parse(text) as unknown;
        stripAlways(expected);
        expect(got).toEqual(expected);
      }),
      { numRuns: 500 },
    );
  });
});

/** The stripping parseJson does, done on every value whatever its text: the model. */
function stripAlways(value: unknown): void {
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const item of value) stripAlways(item);
    return;
  }
  const record = value as Record<string, unknown>;
  if (Object.prototype.hasOwnProperty.call(record, '__proto__')) delete record['__proto__'];
  if (Object.prototype.hasOwnProperty.call(record, 'constructor')) {
    const ctor = record['constructor'];
    if (ctor !== null && typeof ctor === 'object' && 'prototype' in ctor)
      delete record['constructor'];
  }
  for (const key of Object.keys(record)) stripAlways(record[key]);
}

describe('safeJsonParse: syntax and depth', () => {
  it('parses ordinary JSON', () => {
    expect(safeJsonParse('{"a":[1,"x",null,true]}')).toEqual({
      ok: true,
      value: { a: [1, 'x', null, true] },
    });
  });

  it('reports syntax errors without throwing', () => {
    const r = safeJsonParse('{"a":');
    expect(r.ok).toBe(false);
    expect(r.ok === false && r.reason).toBe('syntax');
  });

  it('reports depth over the limit', () => {
    const r = safeJsonParse('[[[1]]]', 2);
    expect(r).toMatchObject({ ok: false, reason: 'depth' });
    expect(safeJsonParse('[[[1]]]', 3)).toEqual({ ok: true, value: [[[1]]] });
  });

  it('does not throw on 100000 unclosed brackets', () => {
    const text = '['.repeat(100_000);
    expect(() => safeJsonParse(text)).not.toThrow();
    expect(safeJsonParse(text).ok).toBe(false);
    expect(safeJsonParse(text, 100)).toMatchObject({ ok: false, reason: 'depth' });
    expect(() => parseFrame(text)).not.toThrow();
  });

  it('does not throw on 100000 unclosed braces containing a dangerous key', () => {
    const text = '{"__proto__":'.repeat(100_000);
    expect(() => safeJsonParse(text)).not.toThrow();
    expect(safeJsonParse(text).ok).toBe(false);
  });

  it('does not throw on 100000 balanced brackets', () => {
    const text = '['.repeat(100_000) + ']'.repeat(100_000);
    expect(() => safeJsonParse(text)).not.toThrow();
    expect(safeJsonParse(text, 1000)).toMatchObject({ ok: false, reason: 'depth' });
  });

  it('a Peer answers 100000-deep input with an error and stays usable', async () => {
    const raw = createRawPeer({ parse: { maxDepth: 64 } });
    const deep = await raw.send('['.repeat(100_000));
    expect(deep.map((f) => (json(f) as { error: { code: number } }).error.code)).toEqual([-32600]);
    const unlimited = createRawPeer();
    const bad = await unlimited.send('['.repeat(100_000));
    expect(bad.map((f) => (json(f) as { error: { code: number } }).error.code)).toEqual([-32700]);
    const ping = await unlimited.send('{"jsonrpc":"2.0","method":"rpc.ping","id":1}');
    expect(ping.map(json)).toEqual([{ jsonrpc: '2.0', result: 'pong', id: 1 }]);
  });
});

describe('exceedsDepth', () => {
  it('counts objects and arrays alike', () => {
    expect(exceedsDepth('{"a":[{"b":[1]}]}', 4)).toBe(false);
    expect(exceedsDepth('{"a":[{"b":[1]}]}', 3)).toBe(true);
  });

  it('tracks siblings, not total brackets', () => {
    const text = JSON.stringify([[1], [2], [3], [4], [5], [6], [7], [8]]);
    expect(exceedsDepth(text, 2)).toBe(false);
    expect(exceedsDepth(text, 1)).toBe(true);
  });

  it('ignores brackets inside strings', () => {
    const text = JSON.stringify({ a: '[[[[[[[[[[{{{{{{{{{{', b: ']]]]]]]]]]' });
    expect(exceedsDepth(text, 1)).toBe(false);
    expect(exceedsDepth(JSON.stringify(['[[[[[[', ['{{{{{{']]), 2)).toBe(false);
    expect(exceedsDepth(JSON.stringify(['[[[[[[', ['{{{{{{']]), 1)).toBe(true);
  });

  it('does not end a string at an escaped quote', () => {
    // The string is  \"[[[[[[[[  : if the escaped quote ended it, the brackets would count.
    const text = JSON.stringify({ a: '"[[[[[[[[[[[[', b: 'x\\"[[[[[[[[[[' });
    expect(text).toContain('\\"[[[[');
    expect(exceedsDepth(text, 1)).toBe(false);
  });

  it('ends a string after an escaped backslash', () => {
    // ["\\",[[1]]] : the string holds one backslash; the quote after it closes it.
    const text = JSON.stringify(['\\', [[1]]]);
    expect(text).toBe('["\\\\",[[1]]]');
    expect(exceedsDepth(text, 3)).toBe(false);
    expect(exceedsDepth(text, 2)).toBe(true);
  });

  it('handles unicode escapes and brackets after strings', () => {
    const text = '{"k\\u005b":"\\u005d\\"","n":[[[0]]]}';
    expect(exceedsDepth(text, 4)).toBe(false);
    expect(exceedsDepth(text, 3)).toBe(true);
  });

  it('agrees with the real depth of generated values', () => {
    for (let depth = 1; depth <= 12; depth++) {
      let value: unknown = 'x]"\\[';
      for (let i = 0; i < depth; i++) value = i % 2 ? { '[k': value, s: '{"' } : ['"]', value];
      const text = JSON.stringify(value);
      expect(exceedsDepth(text, depth)).toBe(false);
      expect(exceedsDepth(text, depth - 1)).toBe(true);
    }
  });

  it('agrees with the real depth of any value, whatever brackets its strings and keys hold', () => {
    // Strings made of the characters the scan treats specially, so the count of `{` and `[`
    // (strings' included) is often past the depth while the nesting is not.
    const text = fc.string({ unit: fc.constantFrom('{', '[', ']', '}', '"', '\\', 'u', 'a') });
    const { value } = fc.letrec<{ value: unknown }>((tie) => ({
      value: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        text,
        fc.integer(),
        fc.array(tie('value'), { maxLength: 4 }),
        fc.dictionary(text, tie('value'), { maxKeys: 3 }),
      ),
    }));
    const depthOf = (v: unknown): number =>
      v === null || typeof v !== 'object'
        ? 0
        : 1 + Math.max(0, ...Object.values(v as Record<string, unknown>).map(depthOf));
    fc.assert(
      fc.property(value, fc.nat(12), (v, maxDepth) => {
        expect(exceedsDepth(JSON.stringify(v), maxDepth)).toBe(depthOf(v) > maxDepth);
      }),
      { numRuns: 2_000 },
    );
  });

  it('does not throw on huge input', () => {
    expect(exceedsDepth('['.repeat(100_000), 10)).toBe(true);
    expect(exceedsDepth('"'.repeat(100_001), 10)).toBe(false);
  });
});

describe('text that starts no JSON value', () => {
  const notJson = ['', ' ', ' \t\r\n', 'x', ' \u00a0x', '\u0000', ']', '}{', 'undefined'];

  it('is answered -32700 as ever, without calling JSON.parse (its SyntaxError costs a stack trace)', () => {
    const parse = vi.spyOn(JSON, 'parse');
    try {
      for (const text of notJson) {
        expect(parseFrame(text, { maxDepth: 64, maxJsonValues: 10_000 })).toEqual({
          batch: false,
          messages: [
            {
              kind: 'invalid',
              version: '2.0',
              id: null,
              error: { code: -32700, message: 'Parse error' },
            },
          ],
        });
      }
      expect(parse).not.toHaveBeenCalled();
    } finally {
      parse.mockRestore();
    }
  });

  it('is still refused for its depth or its values first, as the scan before parsing finds them', () => {
    expect(parseFrame('x' + '['.repeat(200), { maxDepth: 64 }).messages[0]).toMatchObject({
      error: { code: -32600, data: { maxDepth: 64 } },
    });
    expect(parseFrame('x' + ',1'.repeat(50), { maxJsonValues: 10 }).messages[0]).toMatchObject({
      error: { code: -32600, data: { maxJsonValues: 10 } },
    });
  });

  it('gets from safeJsonParse what JSON.parse gives, its message included, for any text', () => {
    // JSON.parse's value less the keys safe parsing strips (fast-check generates `__proto__`).
    const reference = (text: string) => {
      try {
        return { ok: true, value: stripped(JSON.parse(text)) };
      } catch (err) {
        return { ok: false, reason: 'syntax', message: (err as Error).message };
      }
    };
    const whitespace = fc.constantFrom(' ', '\t', '\n', '\r', '\u00a0', '\u2028', '\uFEFF', '\v');
    const text = fc.oneof(
      fc.string({ maxLength: 12 }),
      fc.string({ unit: 'binary', maxLength: 12 }),
      fc
        .tuple(fc.array(whitespace, { maxLength: 3 }), fc.json({ maxDepth: 2 }))
        .map(([lead, json]) => lead.join('') + json),
      fc
        .tuple(fc.array(whitespace, { maxLength: 3 }), fc.string({ maxLength: 4 }))
        .map(([lead, rest]) => lead.join('') + rest),
    );
    fc.assert(
      fc.property(text, (t) => {
        expect(safeJsonParse(t)).toEqual(reference(t));
      }),
      { numRuns: 2000 },
    );
  });
});

/**
 * The request text an upstream receives carries the client's params as sent (gateway-mode.md,
 * "The envelope"): every number in them has the text the client wrote, even one a double does
 * not hold as written (12345678901234567890, 1e400, 1.0, -0, 1E+2); params whose numbers all
 * round-trip are written by JSON.stringify, as before; params a handler changed are written as
 * they are now.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseIncomingWith } from '../../src/protocol/classify.js';
import type { Frame, Incoming } from '../../src/protocol/classify.js';
import { idTextsOf } from '../../src/protocol/id-text.js';
import { keepParamsTexts } from '../../src/protocol/params-text.js';
import type { Params } from '../../src/protocol/types.js';
import { requestText } from '../../src/upstream/request-text.js';
import { jsonNumberText } from '../support/jsonrpc-arbitraries.js';

/** The messages of a frame as the server's peers parse it (peer.ts, answering-peer.ts). */
function parsed(text: string): Incoming[] {
  const frame: Incoming | Frame = parseIncomingWith(text, {}, idTextsOf);
  keepParamsTexts(text, frame);
  return 'kind' in frame ? [frame] : frame.messages;
}

function paramsOf(message: Incoming): Params | undefined {
  if (message.kind !== 'request' && message.kind !== 'notification') {
    throw new Error(`not a call: ${message.kind}`);
  }
  return message.params;
}

/** The params text of the request the upstream receives for `params`. */
function upstreamParams(params: Params | undefined): string | undefined {
  const text = requestText({ method: 'm', params, id: 7 });
  const match = /,"params":(.*),"id":7\}$/s.exec(text);
  return match?.[1];
}

/** The number tokens of a JSON text, in order (strings skipped). */
function numberTexts(json: string): string[] {
  const tokens = json.match(/"(?:[^"\\]|\\.)*"|-?\d[\d.eE+-]*/g) ?? [];
  return tokens.filter((token) => !token.startsWith('"'));
}

function roundTrips(text: string): boolean {
  const value = Number(text);
  return Number.isFinite(value) && String(value) === text;
}

const numberText = fc.oneof(
  jsonNumberText,
  fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
  fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
  fc.constantFrom('-0', '1.0', '1E+2', '1e400', '-1e400', '0.0000001', '1e21', '9007199254740993'),
);
const space = fc.constantFrom('', ' ', '\n ');
/** Strings a careless scan could take for numbers, keys or the end of params. */
const stringText = fc
  .constantFrom('', '2.0', '1e5', 'params', '\\"}]', '\\"', '12345678901234567890', 'a\\u0041')
  .map((s) => `"${s}"`);
const leafText = fc.oneof(numberText, numberText, stringText, fc.constantFrom('true', 'null'));

/** JSON text of a value holding number texts, with keys of letters, unique per object. */
const { value: valueText } = fc.letrec<{ value: string }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leafText,
    fc
      .tuple(fc.array(tie('value'), { maxLength: 4 }), space)
      .map(([items, s]) => `[${s}${items.join(`,${s}`)}${s}]`),
    fc
      .tuple(fc.uniqueArray(fc.stringMatching(/^[a-z]{1,3}$/), { maxLength: 4 }), space)
      .chain(([keys, s]) =>
        fc
          .tuple(...keys.map(() => tie('value')))
          .map((values) => `{${s}${keys.map((k, i) => `"${k}"${s}:${s}${values[i]}`).join(',')}}`),
      ),
  ),
}));
const paramsText = fc.oneof(
  fc.array(valueText, { maxLength: 5 }).map((items) => `[${items.join(',')}]`),
  fc
    .uniqueArray(fc.stringMatching(/^[a-z]{1,3}$/), { maxLength: 5 })
    .chain((keys) =>
      fc
        .tuple(...keys.map(() => valueText))
        .map((values) => `{${keys.map((k, i) => `"${k}":${values[i]}`).join(', ')}}`),
    ),
);

/** A call's text: a request or a notification, its params before or after its method. */
const callText = fc
  .tuple(paramsText, fc.boolean(), fc.boolean(), numberText)
  .map(([params, notification, paramsFirst, id]) => {
    const members = [`"jsonrpc":"2.0"`, `"method":"orders.pay"`, `"params" : ${params}`];
    if (paramsFirst) members.reverse();
    if (!notification) members.push(`"id":${id}`);
    return { text: `{${members.join(',')}}`, params };
  });

describe('requestText of params parsed from a client', () => {
  it('keeps the number texts the client sent, alone or in a batch', () => {
    fc.assert(
      fc.property(
        fc.array(callText, { minLength: 1, maxLength: 4 }),
        fc.boolean(),
        (calls, batch) => {
          const useBatch = batch || calls.length > 1;
          const text = useBatch ? `[${calls.map((c) => c.text).join(' , ')}]` : calls[0]!.text;
          const messages = parsed(text);
          expect(messages).toHaveLength(calls.length);
          messages.forEach((message, i) => {
            const sent = calls[i]!.params;
            const params = paramsOf(message);
            const received = upstreamParams(params)!;
            expect(numberTexts(received)).toEqual(numberTexts(sent));
            // Params whose numbers all round-trip are written by JSON.stringify, as any other.
            if (numberTexts(sent).every(roundTrips)) expect(received).toBe(JSON.stringify(params));
            else expect(received).toBe(sent);
          });
        },
      ),
      { numRuns: 500 },
    );
  });

  it('writes params a handler changed as they are now', () => {
    const [message] = parsed(
      '{"jsonrpc":"2.0","id":1,"method":"m","params":{"n":1.0,"big":1e400}}',
    );
    const params = paramsOf(message!) as Record<string, unknown>;
    expect(upstreamParams(params)).toBe('{"n":1.0,"big":1e400}');
    params['extra'] = 2;
    expect(upstreamParams(params)).toBe('{"n":1,"big":null,"extra":2}');
  });

  it('writes params the parse removed a key from by JSON.stringify, without that key', () => {
    const [message] = parsed(
      '{"jsonrpc":"2.0","id":1,"method":"m","params":{"__proto__":{"a":1},"n":1.0}}',
    );
    const params = paramsOf(message!);
    expect(upstreamParams(params)).toBe('{"n":1}');
  });

  it('finds params under an escaped key, and the last of two params members', () => {
    const [escaped] = parsed('{"jsonrpc":"2.0","id":1,"method":"m","\\u0070arams":[1.0]}');
    expect(upstreamParams(paramsOf(escaped!))).toBe('[1.0]');
    const [twice] = parsed('{"jsonrpc":"2.0","id":1,"method":"m","params":[2.0],"params":[-0]}');
    expect(upstreamParams(paramsOf(twice!))).toBe('[-0]');
    const [first] = parsed('{"jsonrpc":"2.0","id":1,"method":"m","params":[2.0],"params":[3]}');
    expect(upstreamParams(paramsOf(first!))).toBe('[3]');
  });

  it('keeps nothing for params without such a number', () => {
    for (const text of [
      '{"jsonrpc":"2.0","id":1.0,"method":"m","params":{"price":19.99,"v":"1.0"}}',
      '{"jsonrpc":"2.0","id":1,"method":"m","params":[0.000001,123456789012345,-0.0015]}',
    ]) {
      const [message] = parsed(text);
      const params = paramsOf(message!);
      expect(upstreamParams(params)).toBe(JSON.stringify(params));
    }
  });
});

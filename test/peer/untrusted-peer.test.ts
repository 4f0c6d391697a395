/*
 * What a peer does with what the other side may send at will, and with what its own caller may
 * hand it from JavaScript: malformed responses to its pending calls, floods of the reserved
 * methods it answers, and calls whose method is not a string.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { Handler } from '../../src/peer/method-registry.js';
import { encodeNotification, encodeRequest } from '../../src/protocol/encode.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { InternalError } from '../../src/protocol/errors.js';
import type { Params } from '../../src/protocol/types.js';
import { Resources } from '../support/resources.js';
import { deferred, rejectionOf } from '../support/promises.js';
import { openRaw } from '../support/sockets.js';
import { settle } from '../support/peers.js';
import { capturingLogger, cleanup, pair, raw, watch } from './helpers.js';

const res = new Resources();
afterEach(async () => {
  cleanup();
  await res.cleanup();
});

/** Malformed responses to the call with id `id`, and the reason each is refused for. */
const malformed: [string, (id: number) => string, string][] = [
  [
    'both result and error',
    (id) => `{"jsonrpc":"2.0","result":1,"error":{"code":-32000,"message":"x"},"id":${id}}`,
    'both "result" and "error"',
  ],
  [
    'an error whose code is a string',
    (id) => `{"jsonrpc":"2.0","error":{"code":"E42","message":"boom"},"id":${id}}`,
    'malformed "error"',
  ],
  [
    'an error that is a string',
    (id) => `{"jsonrpc":"2.0","error":"boom","id":${id}}`,
    'malformed "error"',
  ],
  ['no "jsonrpc" member', (id) => `{"result":42,"id":${id}}`, 'missing or wrong "jsonrpc" member'],
  [
    '"jsonrpc":"1.0"',
    (id) => `{"jsonrpc":"1.0","result":42,"id":${id}}`,
    'missing or wrong "jsonrpc" member',
  ],
];

describe('a malformed response to a pending call', () => {
  it.each(malformed)(
    'with %s rejects that call at once with -32603 "Malformed response", even without a timeout',
    async (_label, body, reason) => {
      const logger = capturingLogger();
      const r = raw({ logger, callTimeoutMs: 0 });
      const call = rejectionOf(r.peer.call('remote'));
      const other = watch(r.peer.call('other'));
      await settle();
      expect(JSON.parse(r.received[0]!)).toMatchObject({ method: 'remote', id: 1 });
      expect(await r.send(body(1))).toEqual([]);
      const err = await call;
      expect(err).toBeInstanceOf(InternalError);
      expect(err).toMatchObject({
        code: ErrorCode.InternalError,
        message: 'Malformed response',
        data: { reason },
      });
      // The call it names only: the other is still waiting for its own answer.
      expect(other.settled).toBe(false);
      expect(r.peer.pendingCount).toBe(1);
      expect(logger.at('warn').map((l) => l.msg)).toEqual(['a malformed response failed its call']);
      // The connection goes on.
      expect(await r.send('{"jsonrpc":"2.0","result":"late","id":2}')).toEqual([]);
      expect(other.outcome).toBe('late');
    },
  );

  it('in a batch, fails the calls it names and lets the well-formed responses settle theirs', async () => {
    const r = raw({ callTimeoutMs: 0 });
    const first = rejectionOf(r.peer.call('a'));
    const second = r.peer.call('b');
    await settle();
    await r.send(`[${malformed[0]![1](1)},{"jsonrpc":"2.0","result":"ok","id":2}]`);
    expect(await first).toMatchObject({
      code: ErrorCode.InternalError,
      data: { reason: malformed[0]![2] },
    });
    expect(await second).toBe('ok');
  });

  it('naming no pending call, or with no valid id, is dropped with a warn line and fails nothing', async () => {
    const logger = capturingLogger();
    const r = raw({ logger, callTimeoutMs: 0 });
    const call = watch(r.peer.call('remote'));
    await settle();
    await r.send(malformed[0]![1](7));
    await r.send('{"jsonrpc":"2.0","result":1,"error":{"code":1,"message":"x"},"id":{}}');
    await r.send('{"jsonrpc":"2.0","result":1,"error":{"code":1,"message":"x"}}');
    expect(call.settled).toBe(false);
    expect(logger.at('warn').map((l) => l.msg)).toEqual([
      'dropped a malformed response',
      'dropped a malformed response',
      'dropped a malformed response',
    ]);
  });

  it("to a gateway session's call fails that call at once", async () => {
    const { url, gateway } = await res.gateway({ callTimeoutMs: 0 });
    const socket = await openRaw(res, url);
    await socket.barrier();
    const [session] = gateway.sessions.values();
    const call = rejectionOf(session!.call('client.ask', ['?']));
    await socket.until(() => socket.frames.some((f) => f.method === 'client.ask'), 'the call');
    const request = socket.frames.find((f) => f.method === 'client.ask')!;
    socket.send({ id: request.id, result: 'yes' });
    expect(await call).toMatchObject({
      code: ErrorCode.InternalError,
      message: 'Malformed response',
      data: { reason: 'missing or wrong "jsonrpc" member' },
    });
  });
});

describe('reserved methods the layer above gives', () => {
  it('count against maxInFlight like any handler: beyond it, -32000 {maxInFlight}', async () => {
    const gate = deferred<string>();
    let running = 0;
    const token: Handler<string> = async () => {
      running++;
      return { token: await gate.promise };
    };
    const app: Handler<string> = () => gate.promise;
    const r = raw({ maxInFlight: 3, reservedMethods: new Map([['rpc.token', token]]) });
    r.peer.registry.method('app', app);
    const batch = [1, 2, 3, 4, 5].map((id) => ({ jsonrpc: '2.0', method: 'rpc.token', id }));
    const pending = r.send(JSON.stringify(batch));
    await settle();
    expect(running).toBe(3);
    expect(r.peer.inFlightCount).toBe(3);
    // Application calls share the same bound.
    const [busy] = await r.send('{"jsonrpc":"2.0","method":"app","id":6}');
    expect(JSON.parse(busy!)).toEqual({
      jsonrpc: '2.0',
      error: { code: ErrorCode.ServerBusy, message: 'Server busy', data: { maxInFlight: 3 } },
      id: 6,
    });
    gate.resolve('t');
    await pending;
    await settle();
    const [reply] = r.received.slice(-1).map((s): unknown => JSON.parse(s));
    expect(reply).toEqual([
      { jsonrpc: '2.0', result: { token: 't' }, id: 1 },
      { jsonrpc: '2.0', result: { token: 't' }, id: 2 },
      { jsonrpc: '2.0', result: { token: 't' }, id: 3 },
      {
        jsonrpc: '2.0',
        error: { code: ErrorCode.ServerBusy, message: 'Server busy', data: { maxInFlight: 3 } },
        id: 4,
      },
      {
        jsonrpc: '2.0',
        error: { code: ErrorCode.ServerBusy, message: 'Server busy', data: { maxInFlight: 3 } },
        id: 5,
      },
    ]);
    expect(running).toBe(3);
  });
});

describe('a method that is not a string', () => {
  const notStrings: unknown[] = [undefined, null, 42, {}, ['m'], true];

  it.each(notStrings)(
    '(%o) is refused with a TypeError by call, notify and batch; nothing is sent',
    async (method) => {
      const { a, ta } = pair();
      // Given as the method, or as a descriptor's name (null and undefined as a descriptor only).
      const targets = method == null ? [{ name: method }] : [method, { name: method }];
      for (const target of targets) {
        expect(await rejectionOf(a.call(target as never))).toBeInstanceOf(TypeError);
      }
      expect(() => a.notify(method as string)).toThrow(TypeError);
      const batch = await rejectionOf(
        a.batch([
          { method: 'fine' },
          { method: method as string },
          { method: 'note', notification: true },
        ]),
      );
      expect(batch).toBeInstanceOf(TypeError);
      await rejectionOf(a.batch([{ method: method as string, notification: true }]));
      expect(ta.sent).toEqual([]);
      expect(a.pendingCount).toBe(0);
      // The peer goes on.
      expect(await a.call('rpc.ping')).toBe('pong');
    },
  );

  it('encodeRequest and encodeNotification refuse exactly the methods that are not strings', () => {
    const params = fc.option(
      fc.oneof(fc.array(fc.jsonValue()), fc.dictionary(fc.string(), fc.jsonValue())),
      {
        nil: undefined,
      },
    );
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.anything()), params, fc.nat(), (method, p, id) => {
        const encode = () => [
          encodeRequest(id, method as string, p as Params | undefined),
          encodeNotification(method as string, p as Params | undefined),
        ];
        if (typeof method !== 'string') {
          expect(encode).toThrow(TypeError);
          return;
        }
        // Exactly the text JSON.stringify writes for the message.
        const call =
          p === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params: p };
        expect(encode()).toEqual([JSON.stringify({ ...call, id }), JSON.stringify(call)]);
      }),
    );
  });
});

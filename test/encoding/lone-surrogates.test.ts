/**
 * A string with a lone surrogate (JSON text can spell one, "\ud800") has no UTF-8 form, so no
 * MessagePack or CBOR string carries it. A message holding one is refused precisely wherever it
 * would go out in a binary encoding, as a message nested too deep is: a reply becomes -32603 with
 * a reason, a call to the peer rejects -32603, a notification that got past the entry checks
 * closes that one connection 1011; the entry checks (publish, session.notify, a stream's value,
 * a broker's payload) refuse it for every encoding. A JSON connection is sent it as it is.
 */
import { Subject } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import { UnencodableMessageError } from '../../src/encoding/codec.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { msgpack } from '../../src/msgpack.js';
import { isSendablePayload } from '../../src/pubsub/sendable-payload.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { JsonRpcError } from '../../src/protocol/errors.js';
import { Resources } from '../support/resources.js';
import { closeOf } from '../support/sockets.js';
import { within } from '../support/waiting.js';
import { rawBinarySocket } from './raw-binary-socket.js';

const resources = new Resources();
afterEach(() => resources.cleanup());

/** Lone surrogates short and long (past 64 characters the encoders take another path). */
const LONE = ['a\ud800b', '\udc00', 'x'.repeat(100) + '\ud800', '\ud83d\ud83d'];

const lonely = expect.stringMatching(/lone surrogate/);

/**
 * A gateway whose `parse` answers the value of the JSON text it is given: a string a binary
 * client cannot send (its frame would be refused as not UTF-8) reaches the reply so, as one a
 * JSON client sent would.
 */
async function binaryGateway() {
  const running = await resources.gateway({ encodings: ['json', 'msgpack', 'cbor'] });
  running.gateway.method('echo', (params) => params);
  running.gateway.method('parse', (params) => JSON.parse((params as string[])[0]!) as unknown);
  running.gateway.topic('news');
  return running;
}

/** A raw socket of `codec`, once a first call has been answered (its session is open). */
async function openSocket(url: string, codec: WireCodec) {
  const raw = await rawBinarySocket(resources, url, [codec.subprotocol], codec.decode);
  raw.socket.send(codec.encode({ jsonrpc: '2.0', id: 0, method: 'echo', params: [] }));
  await within(raw.next(), 'the first answer');
  return raw;
}

describe.each([msgpack, cbor])('$name', (codec: WireCodec) => {
  it('a reply holding a lone surrogate is answered -32603 with a reason; the connection stays', async () => {
    const { url } = await binaryGateway();
    const raw = await openSocket(url, codec);
    let id = 0;
    for (const text of LONE) {
      for (const value of [text, { [text]: 1 }, [1, { k: text }]]) {
        const json = JSON.stringify(value);
        raw.socket.send(
          codec.encode({ jsonrpc: '2.0', id: ++id, method: 'parse', params: [json] }),
        );
        const reply = await within(raw.next(), `the answer to ${json}`);
        expect(codec.check(reply.bytes, 64)).toBe('ok');
        expect(reply.value).toEqual({
          jsonrpc: '2.0',
          id,
          error: {
            code: ErrorCode.InternalError,
            message: 'Internal error',
            data: { reason: lonely },
          },
        });
      }
    }
    // Pairs, escaped or not, are characters like any other.
    for (const json of [
      '"\\\\ud800"', // an escaped backslash, then text
      '"\\ud83d\\ude00"',
      '"😀é"',
      JSON.stringify('€'.repeat(100) + '😀'),
    ]) {
      raw.socket.send(codec.encode({ jsonrpc: '2.0', id: ++id, method: 'parse', params: [json] }));
      expect((await within(raw.next(), 'the answer')).value).toEqual({
        jsonrpc: '2.0',
        id,
        result: JSON.parse(json) as unknown,
      });
    }
  });

  it('a server-to-client call holding a lone surrogate rejects -32603; the connection stays', async () => {
    const { url, gateway } = await binaryGateway();
    const raw = await openSocket(url, codec);
    const [session] = gateway.sessions.values();
    for (const text of LONE) {
      const settled = await within(
        session!.call('client.m', [text]).then(
          () => 'resolved',
          (err: unknown) => err,
        ),
        'the call settles',
      );
      expect(settled).toMatchObject({ code: ErrorCode.InternalError, data: { reason: lonely } });
    }
    expect(raw.inbox).toEqual([]);
    raw.socket.send(codec.encode({ jsonrpc: '2.0', id: 2, method: 'echo', params: [3] }));
    expect((await within(raw.next(), 'the next answer')).value).toMatchObject({ result: [3] });
  });

  it('a notification holding a lone surrogate is refused by session.notify; past it, closes 1011', async () => {
    const { url, gateway } = await binaryGateway();
    const raw = await openSocket(url, codec);
    const closed = closeOf(raw.socket);
    const [session] = gateway.sessions.values();
    expect(() => session!.notify('m', ['a\ud800'])).toThrow(TypeError);
    expect(() => session!.notify('m', { ['\udc00']: 1 })).toThrow(/lone surrogate/);
    await expect(gateway.notifySession(session!.id, 'm', ['a\ud800'])).rejects.toThrow(TypeError);
    await expect(gateway.notifyUser('someone', 'm', ['a\ud800'])).rejects.toThrow(TypeError);
    // Past session.notify's own check: the codec's last resort on the way out.
    session!.peer.notify('m', ['a\ud800']);
    expect(await within(closed, 'the close')).toMatchObject({ code: 1011, reason: lonely });
    expect(raw.inbox).toEqual([]);
  });

  it('the client: a call holding a lone surrogate rejects -32603 unsent, notify throws', async () => {
    const { url } = await binaryGateway();
    const client = resources.client(url, { encoding: codec, callTimeoutMs: 60_000 });
    await client.opened();
    for (const text of LONE) {
      const settled = await within(
        client.call('echo', [text]).then(
          (result: unknown) => ({ result }),
          (err: unknown) => err,
        ),
        'the call settles',
      );
      expect(settled).toBeInstanceOf(JsonRpcError);
      expect(settled).toMatchObject({ code: ErrorCode.InternalError, data: { reason: lonely } });
      expect(() => client.notify('echo', { [text]: 1 })).toThrow(UnencodableMessageError);
    }
    // A reply holding one, as the gateway's -32603: not a frame the client would drop.
    await expect(client.call('parse', [JSON.stringify(LONE[0])])).rejects.toMatchObject({
      code: ErrorCode.InternalError,
      data: { reason: lonely },
    });
    expect(await within(client.call('echo', ['😀']), 'the next call')).toEqual(['😀']);
    expect(client.state).toBe('open');
  });
});

describe('a JSON connection', () => {
  it('is sent a reply holding a lone surrogate as it is', async () => {
    const { url } = await binaryGateway();
    const raw = await rawBinarySocket(resources, url, ['jsonrpc-2.0']);
    for (const text of LONE) {
      raw.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'echo', params: [text] }));
      const reply = await within(raw.next(), 'the answer');
      expect(reply.binary).toBe(false);
      expect(reply.value).toEqual({ jsonrpc: '2.0', id: 1, result: [text] });
    }
  });
});

describe('published data holding a lone surrogate', () => {
  it('is refused by publish, for every encoding; every subscriber keeps every other message', async () => {
    const { url, gateway } = await binaryGateway();
    const sockets = [];
    for (const codec of [msgpack, cbor]) {
      const raw = await rawBinarySocket(resources, url, [codec.subprotocol], codec.decode);
      raw.socket.send(
        codec.encode({ jsonrpc: '2.0', id: 1, method: 'subscribe', params: ['news'] }),
      );
      await within(raw.next(), 'subscribed');
      sockets.push(raw);
    }
    await gateway.publish('news', { n: 1 });
    for (const data of ['a\ud800', { k: ['\udfff'] }, { ['\ud800']: 1 }]) {
      await expect(gateway.publish('news', data)).rejects.toThrow(TypeError);
    }
    await gateway.publish('news', { n: 3, s: '😀' });
    for (const raw of sockets) {
      const seen = [];
      for (let i = 0; i < 2; i++) {
        const { value } = await within(raw.next(), 'a message');
        seen.push((value as { params: { seq: number; result: unknown } }).params);
      }
      expect(seen).toMatchObject([
        { seq: 1, result: { n: 1 } },
        { seq: 2, result: { n: 3, s: '😀' } },
      ]);
    }
  });

  it('on the broker, from another writer, is no sendable payload (told to subscribers as missed)', () => {
    expect(isSendablePayload('"a\\ud800"')).toBe(false);
    expect(isSendablePayload('{"\\udc00":1}')).toBe(false);
    expect(isSendablePayload('"\\ud83d\\ude00"')).toBe(true);
    expect(isSendablePayload('"\\\\ud800"')).toBe(true); // an escaped backslash, then text
  });

  it.each([
    ['json', 'json' as const],
    ['msgpack', msgpack],
    ['cbor', cbor],
  ])('a stream value holding one ends that stream with -32603 (%s)', async (_name, encoding) => {
    const { gateway, url } = await binaryGateway();
    const values = new Subject<unknown>();
    gateway.stream('values', () => values);
    const client = resources.client(url, { encoding });
    await client.opened();
    const seen: unknown[] = [];
    const ended = new Promise<unknown>((resolve, reject) => {
      client.subscribe('values').subscribe({
        next: (value) => seen.push(value),
        error: resolve,
        complete: () => reject(new Error('completed instead of failing')),
      });
    });
    await client.call('echo', [0]); // subscribed: its reply went before this one's
    values.next('😀');
    values.next('a\ud800');
    expect(await within(ended, 'the stream ends')).toMatchObject({
      code: ErrorCode.InternalError,
    });
    expect(seen).toEqual(['😀']);
    expect(await client.call('echo', [7])).toEqual([7]);
  });
});

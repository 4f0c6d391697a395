/**
 * The client over MessagePack or CBOR: a call it cannot encode (nested deeper than
 * MAX_MESSAGE_DEPTH, past which msgpackr and cbor-x would recurse into a stack overflow) is
 * refused alone, -32603 with `data: { reason }`, as the gateway refuses one it cannot send; the
 * connection and every other call on it go on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { DisconnectEvent } from '../../src/client/index.js';
import { cbor } from '../../src/cbor.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { MAX_MESSAGE_DEPTH } from '../../src/encoding/encoded-depth.js';
import { msgpack } from '../../src/msgpack.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { MAX_BINARY_DEPTH } from '../../src/transport/websocket-transport.js';
import { Resources } from '../support/resources.js';
import { within } from '../support/waiting.js';

const resources = new Resources();
afterEach(() => resources.cleanup());

/** `0` inside `levels` arrays. */
function nested(levels: number): unknown[] {
  let value: unknown = 0;
  for (let i = 0; i < levels; i++) value = [value];
  return value as unknown[];
}

const refusedAsTooDeep = {
  code: ErrorCode.InternalError,
  data: { reason: expect.stringMatching(/nests deeper than/) as unknown },
};

/** What a promise settled with: its value, or its error. */
function outcome(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => ({ value }),
    (err: unknown) => ({ err }),
  );
}

async function binaryGateway() {
  const running = await resources.gateway({ encodings: ['json', 'msgpack', 'cbor'] });
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  running.gateway.method('echo', (params) => params);
  /** The params of every `note` the gateway was sent. */
  const notes: unknown[] = [];
  running.gateway.method('note', (params) => {
    notes.push(params);
    return null;
  });
  running.gateway.method('held', async () => {
    await released;
    return 'held done';
  });
  return { ...running, release, notes };
}

it('the client reads binary frames as deep as the gateway may send (MAX_MESSAGE_DEPTH)', () => {
  expect(MAX_BINARY_DEPTH).toBe(MAX_MESSAGE_DEPTH);
});

describe.each([msgpack, cbor])('$name', (codec: WireCodec) => {
  it('a call too deep to encode rejects alone; the call in flight and the connection go on', async () => {
    const { url, gateway, release } = await binaryGateway();
    const client = resources.client(url, { encoding: codec });
    const disconnects: DisconnectEvent[] = [];
    client.disconnects$.subscribe((event) => disconnects.push(event));
    await client.opened();
    const [session] = gateway.sessions.values();
    const held = outcome(client.call('held'));
    const deep = await within(outcome(client.call('echo', nested(600))), 'the deep call');
    expect(deep).toEqual({ err: expect.objectContaining(refusedAsTooDeep) as unknown });
    release();
    expect(await within(held, 'the call in flight')).toEqual({ value: 'held done' });
    expect(await within(client.call('echo', [2]), 'the next call')).toEqual([2]);
    expect(disconnects).toEqual([]);
    expect([...gateway.sessions.values()]).toEqual([session]);
  });

  it('batched with others (batchCalls), only the call too deep is refused', async () => {
    const { url, gateway } = await binaryGateway();
    const client = resources.client(url, { encoding: codec, batchCalls: 8 });
    await client.opened();
    const [session] = gateway.sessions.values();
    const calls = [
      client.call('echo', [1]),
      client.call('echo', nested(600)),
      client.call('echo', [3]),
    ].map(outcome);
    expect(await within(Promise.all(calls), 'the calls')).toEqual([
      { value: [1] },
      { err: expect.objectContaining(refusedAsTooDeep) as unknown },
      { value: [3] },
    ]);
    expect([...gateway.sessions.values()]).toEqual([session]);
  });

  it('in client.batch, only the entry too deep is refused', async () => {
    const { url, gateway } = await binaryGateway();
    const client = resources.client(url, { encoding: codec });
    await client.opened();
    const [session] = gateway.sessions.values();
    const settled = await within(
      client.batch([
        { method: 'echo', params: [1] },
        { method: 'echo', params: nested(600) },
        { method: 'echo', params: [3] },
      ]),
      'the batch',
    );
    expect(settled).toEqual([
      { status: 'fulfilled', value: [1] },
      { status: 'rejected', reason: expect.objectContaining(refusedAsTooDeep) as unknown },
      { status: 'fulfilled', value: [3] },
    ]);
    expect([...gateway.sessions.values()]).toEqual([session]);
  });

  it('a notification too deep to encode throws to its sender and sends nothing; the connection goes on', async () => {
    const { url, gateway, notes } = await binaryGateway();
    const client = resources.client(url, { encoding: codec });
    const disconnects: DisconnectEvent[] = [];
    client.disconnects$.subscribe((event) => disconnects.push(event));
    await client.opened();
    const [session] = gateway.sessions.values();
    expect(() => client.notify('note', nested(600))).toThrow(
      expect.objectContaining({
        name: 'UnencodableMessageError',
        message: expect.stringMatching(/nests deeper than/) as unknown,
      }),
    );
    client.notify('note', [1]);
    expect(await within(client.call('echo', [2]), 'the next call')).toEqual([2]);
    expect(notes).toEqual([[1]]);
    expect(disconnects).toEqual([]);
    expect([...gateway.sessions.values()]).toEqual([session]);
  });

  it('queued while disconnected, a notification too deep throws at once and is not queued', async () => {
    const { url, notes } = await binaryGateway();
    // Not open yet: its notifications are queued.
    const client = resources.client(url, { encoding: codec });
    expect(() => client.notify('note', nested(600))).toThrow(/nests deeper than/);
    client.notify('note', [1]);
    await client.opened();
    expect(await within(client.call('echo', [2]), 'a call after the flush')).toEqual([2]);
    expect(notes).toEqual([[1]]);
  });

  it('gathered with others (batchCalls), a notification too deep closes the connection 1011 with why, as the gateway', async () => {
    const { url } = await binaryGateway();
    const client = resources.client(url, { encoding: codec, batchCalls: 8 });
    const disconnect = new Promise<DisconnectEvent>((resolve) => {
      client.disconnects$.subscribe(resolve);
    });
    await client.opened();
    client.notify('echo', nested(600));
    expect(await within(disconnect, 'the close')).toMatchObject({
      code: 1011,
      reason: expect.stringMatching(/nests deeper than/) as unknown,
    });
  });
});

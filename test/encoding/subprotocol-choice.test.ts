/**
 * The subprotocol a gateway answers names an encoding that is on, or none: confirming one that
 * is off would leave the client sending frames the connection refuses (1003).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { cbor } from '../../src/cbor.js';
import { msgpack } from '../../src/msgpack.js';
import { Resources } from '../support/resources.js';
import { openSocket } from '../support/sockets.js';
import { within } from '../support/waiting.js';
import { rawBinarySocket } from './raw-binary-socket.js';

const resources = new Resources();
afterEach(() => resources.cleanup());

/** The handshake's outcome: the subprotocol answered, or the client's error. */
function handshake(url: string, protocols: string[]): Promise<string | Error> {
  const socket = resources.track(new WebSocket(url, protocols));
  return within(
    new Promise((resolve) => {
      socket.once('open', () => resolve(socket.protocol));
      socket.once('error', (err) => resolve(err));
    }),
    'the handshake',
  );
}

describe('an offer of encodings that are off', () => {
  it('is never confirmed: an encoding on, JSON, or a token offered is answered instead', async () => {
    const { url } = await resources.gateway({ encodings: ['json', 'msgpack'] });
    expect(await handshake(url, [cbor.subprotocol, 'jsonrpc-2.0'])).toBe('jsonrpc-2.0');
    expect(await handshake(url, [cbor.subprotocol, msgpack.subprotocol])).toBe(msgpack.subprotocol);
    expect(await handshake(url, [cbor.subprotocol, 'token.abc'])).toBe('token.abc');
    const json = await resources.gateway({ encodings: ['json'] });
    expect(await handshake(json.url, [msgpack.subprotocol, cbor.subprotocol])).toMatchObject({
      message: 'Server sent no subprotocol',
    });
  });

  it('alone gets no subprotocol, so the client fails the handshake', async () => {
    const { url } = await resources.gateway({ encodings: ['json', 'msgpack'] });
    expect(await handshake(url, [cbor.subprotocol])).toMatchObject({
      message: 'Server sent no subprotocol',
    });
  });

  it('leaves an encoding that is on working', async () => {
    const { url, gateway } = await resources.gateway({ encodings: ['json', 'msgpack'] });
    gateway.method('echo', (params) => params);
    const raw = await rawBinarySocket(resources, url, [msgpack.subprotocol], msgpack.decode);
    raw.socket.send(msgpack.encode({ jsonrpc: '2.0', id: 1, method: 'echo', params: [1] }));
    expect((await within(raw.next(), 'the answer')).value).toMatchObject({ id: 1, result: [1] });
    expect((await openSocket(resources, url, ['jsonrpc-2.0'])).protocol).toBe('jsonrpc-2.0');
  });
});

/*
 * The client over Node's `ws`, frame by frame: JSON text frames (UTF-8 beyond ASCII) and a
 * binary codec's frames are read as sent, and a text frame on a binary connection closes it
 * 1003. `ws` hands the transport Buffers and ArrayBuffers, not a browser's strings.
 */
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import type { RpcClient } from '../../src/client/client.js';
import type { DisconnectEvent } from '../../src/client/authentication.js';
import { msgpack } from '../../src/msgpack.js';

let server: WebSocketServer | undefined;
let client: RpcClient | undefined;

afterEach(async () => {
  await client?.close();
  client = undefined;
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

/** A server that answers each call with `reply(id)`, as text or through msgpack. */
async function serve(reply: (id: number) => unknown, binary: boolean): Promise<string> {
  server = new WebSocketServer({
    port: 0,
    host: '127.0.0.1',
    handleProtocols: (protocols) => [...protocols][0] ?? false,
  });
  server.on('connection', (socket) => {
    socket.on('message', (data, isBinary) => {
      const text = isBinary
        ? JSON.stringify(msgpack.decode(data as Buffer))
        : (data as Buffer).toString();
      const { id } = JSON.parse(text) as { id: number };
      const answer = reply(id);
      socket.send(
        binary && typeof answer !== 'string' ? msgpack.encode(answer) : JSON.stringify(answer),
      );
    });
  });
  await new Promise((resolve) => server!.once('listening', resolve));
  return `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('client over ws', () => {
  it('reads a JSON text frame with characters beyond ASCII', async () => {
    const url = await serve((id) => ({ jsonrpc: '2.0', result: 'é ✓ 😀', id }), false);
    client = createClient({ url, WebSocket, reconnect: false });
    await expect(client.call('x')).resolves.toBe('é ✓ 😀');
  });

  it('reads a binary codec frame', async () => {
    const url = await serve((id) => ({ jsonrpc: '2.0', result: { a: [1, 'é'] }, id }), true);
    client = createClient({ url, WebSocket, reconnect: false, encoding: msgpack });
    await expect(client.call('x')).resolves.toEqual({ a: [1, 'é'] });
  });

  it('closes 1003 on a text frame on a binary connection', async () => {
    const url = await serve((id) => JSON.stringify({ jsonrpc: '2.0', result: 1, id }), true);
    client = createClient({ url, WebSocket, reconnect: false, encoding: msgpack });
    const ended = new Promise<DisconnectEvent>((resolve) =>
      client!.disconnects$.subscribe(resolve),
    );
    await expect(client.call('x')).rejects.toThrow();
    expect((await ended).code).toBe(1003);
  });
});

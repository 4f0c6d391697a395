/*
 * The client against a server that misbehaves (a plain `ws` server written by hand): a flood of
 * rpc.token requests, malformed responses to its calls; and a batch whose entry has no string
 * method, from JavaScript.
 */
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import type { ClientOptions, RpcClient } from '../../src/client/client.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { InternalError } from '../../src/protocol/errors.js';
import { deferred, rejectionOf } from '../support/promises.js';
import { waitFor } from '../support/waiting.js';

const servers: WebSocketServer[] = [];
const clients: RpcClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  for (const server of servers.splice(0)) {
    for (const socket of server.clients) socket.terminate();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A hand-driven server, and a client connected to it; `frames`: every text the client sent. */
async function connect(options: Partial<ClientOptions> = {}) {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  servers.push(server);
  await new Promise((resolve) => server.once('listening', resolve));
  const frames: string[] = [];
  const sockets: WebSocket[] = [];
  server.on('connection', (socket) => {
    sockets.push(socket);
    socket.on('message', (data) => frames.push((data as Buffer).toString('utf8')));
  });
  const { port } = server.address() as AddressInfo;
  const client = createClient({
    url: `ws://127.0.0.1:${port}/rpc`,
    WebSocket,
    heartbeat: false,
    ...options,
  });
  clients.push(client);
  await client.opened();
  await waitFor(() => sockets.length === 1, 'the connection');
  return { client, frames, socket: sockets[0]! };
}

describe('rpc.token from the server', () => {
  it('at most 256 run at once (beyond, -32000), and those running share one getToken', async () => {
    const token = deferred<string>();
    let asked = 0;
    // The dial's token at once; the rest wait for the test.
    const getToken = (): string | Promise<string> => (++asked === 1 ? 'dial' : token.promise);
    const { socket, frames } = await connect({ getToken, tokenTransport: 'header' });
    const before = asked;
    const flood = Array.from({ length: 300 }, (_, i) => ({
      jsonrpc: '2.0',
      method: 'rpc.token',
      params: { expiresAt: 0 },
      id: i + 1,
    }));
    const sentBefore = frames.length;
    socket.send(JSON.stringify(flood));
    await waitFor(() => asked > before, 'getToken');
    token.resolve('fresh');
    await waitFor(() => frames.length > sentBefore, 'the reply');
    const reply = JSON.parse(frames[sentBefore]!) as {
      id: number;
      result?: unknown;
      error?: unknown;
    }[];
    expect(asked - before).toBe(1);
    expect(reply.filter((r) => r.result !== undefined)).toEqual(
      flood.slice(0, 256).map(({ id }) => ({ jsonrpc: '2.0', result: { token: 'fresh' }, id })),
    );
    expect(reply.filter((r) => r.error !== undefined)).toEqual(
      flood.slice(256).map(({ id }) => ({
        jsonrpc: '2.0',
        error: { code: ErrorCode.ServerBusy, message: 'Server busy', data: { maxInFlight: 256 } },
        id,
      })),
    );
  });

  it('one asked after the last getToken settled calls it again', async () => {
    let asked = 0;
    const { socket, frames } = await connect({
      getToken: () => `t${++asked}`,
      tokenTransport: 'header',
    });
    const before = asked;
    const answers: unknown[] = [];
    for (const id of [1, 2]) {
      const sent = frames.length;
      socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'rpc.token', id }));
      await waitFor(() => frames.length > sent, 'the reply');
      answers.push(JSON.parse(frames[sent]!));
    }
    expect(answers).toEqual([
      { jsonrpc: '2.0', result: { token: `t${before + 1}` }, id: 1 },
      { jsonrpc: '2.0', result: { token: `t${before + 2}` }, id: 2 },
    ]);
  });
});

describe('a malformed response to a call', () => {
  it('rejects it at once with -32603 "Malformed response", without a timeout to end it', async () => {
    const { client, socket, frames } = await connect({ callTimeoutMs: 0 });
    const bodies: Record<string, (id: unknown) => unknown> = {
      both: (id) => ({ jsonrpc: '2.0', id, result: 1, error: { code: -32000, message: 'x' } }),
      badError: (id) => ({ jsonrpc: '2.0', id, error: { code: 'E42', message: 'boom' } }),
      noVersion: (id) => ({ id, result: 42 }),
    };
    const calls = Object.keys(bodies).map((method) => rejectionOf(client.call(method)));
    await waitFor(() => frames.length === 3, 'the calls');
    for (const text of frames) {
      const { method, id } = JSON.parse(text) as { method: string; id: unknown };
      socket.send(JSON.stringify(bodies[method]!(id)));
    }
    const errors = await Promise.all(calls);
    for (const err of errors) expect(err).toBeInstanceOf(InternalError);
    expect(errors.map((e) => (e as InternalError).data)).toEqual([
      { reason: 'both "result" and "error"' },
      { reason: 'malformed "error"' },
      { reason: 'missing or wrong "jsonrpc" member' },
    ]);
    expect(client.state).toBe('open');
  });
});

describe('a batch entry whose method is not a string', () => {
  it('rejects the whole batch with a TypeError and sends nothing, connected or not', async () => {
    const { client, socket, frames } = await connect({ callTimeoutMs: 0 });
    const entries = [{ method: 'fine' }, {}] as never;
    expect(await rejectionOf(client.batch(entries))).toBeInstanceOf(TypeError);
    // The next call is the first frame the server sees.
    const echo = client.call('echo');
    await waitFor(() => frames.length === 1, 'the call');
    expect(JSON.parse(frames[0]!)).toMatchObject({ method: 'echo' });
    socket.send(JSON.stringify({ jsonrpc: '2.0', result: 'ok', id: JSON.parse(frames[0]!).id }));
    expect(await echo).toBe('ok');

    // Disconnected: refused before it is queued.
    socket.terminate();
    await waitFor(() => client.state !== 'open', 'the drop');
    expect(await rejectionOf(client.batch(entries))).toBeInstanceOf(TypeError);
  });
});

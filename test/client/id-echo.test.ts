/*
 * The browser client answers the server's calls with their ids written as sent, like any peer,
 * but finds those ids with idTextsByScan (without idTextsOf's fast path for a lone request, to
 * keep the bundle small). The two must agree on every frame; and on the wire, a request whose
 * numeric id String() would write otherwise is answered under the id's own text.
 */
import fc from 'fast-check';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import type { RpcClient } from '../../src/client/client.js';
import { idTextsByScan, idTextsOf } from '../../src/protocol/id-text.js';
import { jsonNumberText } from '../support/jsonrpc-arbitraries.js';

const idValue = fc.oneof(
  jsonNumberText,
  fc.maxSafeInteger().map(String),
  fc.string({ maxLength: 6 }).map((s) => JSON.stringify(s)),
);
const space = fc.constantFrom('', ' ', '\n ');
/** Params with members named "id" of their own (decoys), in objects and in strings. */
const params = fc.oneof(
  fc.constant(undefined),
  jsonNumberText.map((n) => `{"id":${n}}`),
  jsonNumberText.map((n) => `[{"id": ${n}, "x": "\\"id\\":${n}"}]`),
);
const key = fc.constantFrom('"id"', '"\\u0069d"');

/** A request, a notification or a response, its members in any order. */
const message = fc
  .record({
    id: fc.option(idValue, { nil: undefined }),
    key,
    params,
    response: fc.boolean(),
    at: fc.nat(),
    s: space,
  })
  .map(({ id, key: idKey, params: p, response, at, s }) => {
    const members = response
      ? ['"jsonrpc":"2.0"', '"result":1']
      : ['"jsonrpc":"2.0"', '"method":"m"'];
    if (p !== undefined) members.push(`"params":${s}${p}`);
    if (id !== undefined) members.splice(at % (members.length + 1), 0, `${idKey}${s}:${s}${id}`);
    return `{${s}${members.join(`,${s}`)}${s}}`;
  });

const frame = fc.oneof(
  message,
  fc.array(message, { minLength: 1, maxLength: 4 }).map((ms) => `[${ms.join(', ')}]`),
);

describe('idTextsByScan', () => {
  it('finds the same id texts as idTextsOf, in single messages and batches', () => {
    fc.assert(
      fc.property(frame, (text) => {
        const value: unknown = JSON.parse(text);
        expect(idTextsByScan(text, value)).toEqual(idTextsOf(text, value));
      }),
      { numRuns: 2_000 },
    );
  });
});

const servers: WebSocketServer[] = [];
const clients: RpcClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  for (const server of servers.splice(0)) {
    for (const socket of server.clients) socket.terminate();
    await new Promise((resolve) => server.close(resolve));
  }
});

describe('the client answering the server', () => {
  it('writes a numeric id as the server sent it, single and in a batch', async () => {
    const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    servers.push(server);
    await new Promise((resolve) => server.once('listening', resolve));
    const replies: string[] = [];
    const sockets: WebSocket[] = [];
    server.on('connection', (socket) => {
      sockets.push(socket);
      socket.on('message', (data) => replies.push((data as Buffer).toString('utf8')));
    });
    const { port } = server.address() as AddressInfo;
    const client = createClient({ url: `ws://127.0.0.1:${port}/rpc`, WebSocket, heartbeat: false });
    clients.push(client);
    client.method('echo', (params) => params);
    await client.opened();

    sockets[0]!.send('{"jsonrpc":"2.0","method":"echo","params":[1],"id":1.0}');
    sockets[0]!.send(
      '[{"jsonrpc":"2.0","method":"echo","id":12345678901234567890,"params":[2]},{"jsonrpc":"2.0","method":"echo","params":[3],"id":-0}]',
    );
    await expect.poll(() => replies.length).toBe(2);
    expect(replies[0]).toBe('{"jsonrpc":"2.0","result":[1],"id":1.0}');
    expect(replies[1]).toBe(
      '[{"jsonrpc":"2.0","result":[2],"id":12345678901234567890},{"jsonrpc":"2.0","result":[3],"id":-0}]',
    );
  });
});

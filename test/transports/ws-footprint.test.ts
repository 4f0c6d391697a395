import { afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import type { Session } from '../../src/server/session.js';
import { MAX_PENDING_PONGS } from '../../src/transport/ws-transport.js';
import type { TransportSocket, WsTransport } from '../../src/transport/ws-transport.js';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

/*
 * What a gateway's WebSocket connection carries, and the work of a lone reply: the socket keeps
 * no function of its own (ws's automatic pong keeps a closure per socket; TransportSocket
 * answers pings without one), Node's cached peer address is let go once the session holds its
 * address, and a lone reply is written without corking the socket.
 */

const res = new Resources();
afterEach(() => res.cleanup());

async function onlySession(gateway: Gateway): Promise<Session> {
  await waitUntil(() => gateway.sessions.size === 1, 'the session to open');
  return [...gateway.sessions.values()][0]!;
}

function serverSocket(session: Session): TransportSocket {
  return (session.transport as WsTransport).socket;
}

function netSocketOf(session: Session): Record<string, unknown> {
  return (serverSocket(session) as unknown as { _socket: Record<string, unknown> })._socket;
}

describe('a gateway WebSocket connection', () => {
  it('answers a ping with a pong carrying its payload, before and after a call', async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('echo', (params) => params);
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    await onlySession(gateway);
    const pongs: string[] = [];
    raw.socket.on('pong', (data: Buffer) => pongs.push(data.toString('utf8')));

    raw.socket.ping('first');
    await waitUntil(() => pongs.length === 1, 'the first pong');
    expect((await raw.request('echo', [1])).result).toEqual([1]);
    raw.socket.ping('second');
    await waitUntil(() => pongs.length === 2, 'the second pong');

    expect(pongs).toEqual(['first', 'second']);
  });

  it('keeps no function of its own on the server socket', async () => {
    const { gateway, url } = await res.gateway();
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const socket = serverSocket(await onlySession(gateway));

    const own = Object.entries(socket).filter(([, value]) => typeof value === 'function');
    expect(own.map(([key]) => key)).toEqual([]);
  });

  it('cuts off a peer with too many pongs not yet written, as ws does', async () => {
    const { gateway, url } = await res.gateway();
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const socket = serverSocket(await onlySession(gateway));
    // As if that many pongs were still queued behind a peer that does not read.
    socket.pendingPongs = MAX_PENDING_PONGS;

    raw.socket.ping('one too many');

    const { code } = await raw.closed;
    expect(code).toBe(1006);
  });

  it("lets go of Node's cached peer address once the session holds the address", async () => {
    const { gateway, url } = await res.gateway();
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const session = await onlySession(gateway);

    expect(session.remoteAddress).toBe('127.0.0.1');
    expect(netSocketOf(session)._peername).toBeUndefined();
    // Asked again, the socket still knows it.
    expect(netSocketOf(session).remoteAddress).toBe('127.0.0.1');
  });

  it('writes a lone reply without corking the socket', async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('echo', (params) => params);
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const net = netSocketOf(await onlySession(gateway));
    let corks = 0;
    const cork = net.cork as () => void;
    net.cork = function (this: unknown) {
      corks++;
      cork.call(this);
    };

    expect((await raw.request('echo', ['a'])).result).toEqual(['a']);
    expect((await raw.request('echo', ['b'])).result).toEqual(['b']);

    expect(corks).toBe(0);
  });

  it('keeps eleven fields per connection: what is shared or derivable is not stored', async () => {
    // Each field is 8 bytes on every idle connection. Read when needed instead: ws's net.Socket
    // (the socket keeps it), the output budget (one per gateway, in the shared settings); the
    // wait to resume reading and the close timer share one field (never both at once).
    const { gateway, url } = await res.gateway({ limits: { maxBufferedBytesTotal: 1 << 20 } });
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const transport = (await onlySession(gateway)).transport as WsTransport;

    expect(Object.keys(transport).sort()).toEqual(
      [
        'budgeted',
        'encoding',
        'flags',
        'held',
        'listener',
        'pingPayload',
        'shared',
        'socket',
        'textQueue',
        'textQueueLength',
        'waiting',
      ].sort(),
    );
  });
});

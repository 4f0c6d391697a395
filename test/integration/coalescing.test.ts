import type { WsTransport } from '../../src/transport/ws-transport.js';
import type { NdjsonTransport } from '../../src/transport/ndjson-transport.js';
import { connect as netConnect } from 'node:net';
import type { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import type { Session } from '../../src/server/session.js';
import { RawRpc } from '../support/raw-rpc.js';
import { MAX_GATHERED_FRAMES } from '../../src/transport/turn-coalescer.js';
import { waitUntil, within } from '../support/waiting.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** The write system calls Node has made for one stream. */
interface WriteLog {
  writes: number;
}

/** Count every write Node hands to the operating system for `stream` (`_write` and `_writev`). */
function logWrites(stream: Record<string, unknown>): WriteLog {
  const log: WriteLog = { writes: 0 };
  for (const name of ['_write', '_writev'] as const) {
    const original = stream[name] as (...args: unknown[]) => unknown;
    stream[name] = function (this: unknown, ...args: unknown[]) {
      log.writes++;
      return original.apply(this, args);
    };
  }
  return log;
}

/** Count the write system calls Node makes for one session's socket. */
function countWrites(gateway: Gateway, session: Session): WriteLog {
  const raw = (
    (session.transport as WsTransport).socket as unknown as { _socket: Record<string, unknown> }
  )._socket;
  return logWrites(raw);
}

async function onlySession(gateway: Gateway): Promise<Session> {
  await waitUntil(() => gateway.sessions.size === 1, 'the session to open');
  return [...gateway.sessions.values()][0]!;
}

/** Send `frames` from the client in one TCP write, so the server reads them as one chunk. */
function sendTogether(raw: RawRpc, frames: string[]): void {
  const clientSocket = (raw.socket as unknown as { _socket: Duplex })._socket;
  clientSocket.cork();
  for (const frame of frames) raw.socket.send(frame);
  clientSocket.uncork();
}

describe('write coalescing', () => {
  // With an async handler, the replies are sent in microtasks of the same depth: they gather
  // before the flush as the synchronous ones do.
  it.each([
    ['a synchronous', (params: unknown) => params],
    [
      'an async',
      async (params: unknown) => {
        await Promise.resolve();
        return params;
      },
    ],
  ])(
    'answers 64 pipelined requests to %s handler, arriving together, in writes of 16 replies, in order',
    async (_kind, handler) => {
      const { gateway, url } = await res.gateway();
      gateway.method('echo', handler);
      const raw = await RawRpc.open(url);
      res.track(raw.socket);
      const counter = countWrites(gateway, await onlySession(gateway));

      sendTogether(
        raw,
        Array.from({ length: 64 }, (_, i) =>
          JSON.stringify({ jsonrpc: '2.0', method: 'echo', params: [i + 1], id: i + 1 }),
        ),
      );
      await raw.until(() => raw.frames.length === 64, 'all 64 replies');

      expect(raw.frames.map((f) => (f as { id: number }).id)).toEqual(
        Array.from({ length: 64 }, (_, i) => i + 1),
      );
      // One write per reply without coalescing; one per 16 with it (one more if TCP split the
      // input).
      expect(counter.writes).toBeLessThanOrEqual(64 / MAX_GATHERED_FRAMES + 1);
    },
  );

  it('writes the first replies while the task that read them is still answering the rest', async () => {
    const { gateway, url } = await res.gateway();
    /** The socket's write count as each call's handler saw it, by the call's number. */
    const seenBy: number[] = [];
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const counter = countWrites(gateway, await onlySession(gateway));
    gateway.method('echo', ([n]: [number]) => {
      seenBy[n] = counter.writes;
      return n;
    });

    sendTogether(
      raw,
      Array.from({ length: 64 }, (_, i) =>
        JSON.stringify({ jsonrpc: '2.0', method: 'echo', params: [i + 1], id: i + 1 }),
      ),
    );
    await raw.until(() => raw.frames.length === 64, 'all 64 replies');

    // Gathered until the task was done, none would be written before the last handler ran
    // (one, if TCP split the input); every 16 replies are written as they are made.
    expect(seenBy[64]).toBeGreaterThanOrEqual(3);
    expect(raw.frames.map((f) => (f as { result: number }).result)).toEqual(
      Array.from({ length: 64 }, (_, i) => i + 1),
    );
  });

  it('writes a lone reply before the event loop reaches its check phase', async () => {
    const { gateway, url } = await res.gateway();
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const counter = countWrites(gateway, await onlySession(gateway));
    /** The socket's write count as a setImmediate queued by the handler saw it. */
    const seenAtCheck: number[] = [];
    gateway.method('probe', () => {
      // Queued before the reply is sent: an uncork in a setImmediate would run after this.
      setImmediate(() => seenAtCheck.push(counter.writes));
      return 'ok';
    });

    expect((await raw.request('probe')).result).toBe('ok');
    await waitUntil(() => seenAtCheck.length === 1, 'the check phase');
    expect(seenAtCheck).toEqual([1]);
  });

  it('sends a burst of publishes made in one task to a subscriber in writes of 16', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('burst');
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const id = (await raw.request('subscribe', ['burst'])).result as string;
    const counter = countWrites(gateway, await onlySession(gateway));

    for (let n = 1; n <= 50; n++) void gateway.publish('burst', n);
    await raw.until(() => raw.notifications(id).length === 50, 'all 50 messages');

    expect(raw.notifications(id).map((m) => m.result)).toEqual(
      Array.from({ length: 50 }, (_, i) => i + 1),
    );
    expect(counter.writes).toBeLessThanOrEqual(Math.ceil(50 / MAX_GATHERED_FRAMES));
  });

  it('does not hold large frames back: past 64 KiB a cork is written at once', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('big');
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const id = (await raw.request('subscribe', ['big'])).result as string;
    const session = await onlySession(gateway);
    const counter = countWrites(gateway, session);
    const pad = 'x'.repeat(100 * 1024);

    let maxBuffered = 0;
    for (let n = 1; n <= 5; n++) {
      void gateway.publish('big', { n, pad });
      maxBuffered = Math.max(maxBuffered, session.peer.bufferedAmount);
    }
    await raw.until(() => raw.notifications(id).length === 5, 'all 5 large messages');

    expect(raw.notifications(id).map((m) => (m.result as { n: number }).n)).toEqual([
      1, 2, 3, 4, 5,
    ]);
    expect(raw.notifications(id).every((m) => m.missed === undefined)).toBe(true);
    // Each large frame went out on its own write instead of waiting for the others.
    expect(counter.writes).toBeGreaterThanOrEqual(5);
  });

  it('gathers at most 64 KiB before writing: frames past it are written while the loop runs', async () => {
    const { gateway, url } = await res.gateway();
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const session = await onlySession(gateway);
    const counter = countWrites(gateway, session);
    // 30 frames of about 10 KB in one synchronous loop: about 300 KB. The byte cap comes first:
    // 16 of them (MAX_GATHERED_FRAMES) would be 160 KB.
    const pad = 'x'.repeat(10_000);

    for (let n = 1; n <= 30; n++) session.notify('fill', [n, pad]);
    const writtenInLoop = counter.writes;
    await raw.until(() => raw.frames.length === 30, 'all 30 frames');

    expect(raw.frames.map((f) => (f.params as [number])[0])).toEqual(
      Array.from({ length: 30 }, (_, i) => i + 1),
    );
    // Each time 64 KiB had gathered, it was written there and then (at least 3 times in 300 KB;
    // once, at the 16th frame, for the frame count alone), instead of holding all of it until
    // the loop had ended.
    expect(writtenInLoop).toBeGreaterThanOrEqual(3);
  });

  it('closing mid-task: the frames sent before the close go before the close frame, none after', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('mid');
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const id = (await raw.request('subscribe', ['mid'])).result as string;
    const session = await onlySession(gateway);
    const before = raw.frames.length;

    // One synchronous run: a reply-like text, a shared broadcast frame, a text, the close, more.
    session.notify('a', [1]);
    void gateway.publish('mid', 2);
    session.notify('b', [3]);
    session.close(4001, 'bye');
    // The peer refuses a notify once closed; the transport drops what still reaches it.
    session.transport.send('{"jsonrpc":"2.0","method":"c","params":[4]}');
    void gateway.publish('mid', 5);

    expect(await within(raw.closed, 'the close')).toEqual({ code: 4001, reason: 'bye' });
    expect(raw.frames.slice(before)).toEqual([
      { jsonrpc: '2.0', method: 'a', params: [1] },
      expect.objectContaining({ params: expect.objectContaining({ subscription: id, result: 2 }) }),
      { jsonrpc: '2.0', method: 'b', params: [3] },
    ]);
  });
});

/** The server side of the only TCP session: its session and the stream it writes to. */
async function onlyTcpSession(gateway: Gateway): Promise<{ session: Session; out: Duplex }> {
  const session = await onlySession(gateway);
  const out = (session.transport as unknown as { writable: Duplex }).writable;
  expect((session.transport as NdjsonTransport).kind).toBe('tcp');
  return { session, out };
}

/** A TCP client of the gateway's NDJSON listener, with the lines it receives. */
async function tcpClient(gateway: Gateway): Promise<{ send(line: string): void; lines: string[] }> {
  const { port } = await gateway.listenTcp(0, '127.0.0.1');
  const socket = netConnect(port, '127.0.0.1');
  res.netSockets.push(socket);
  socket.setEncoding('utf8');
  const lines: string[] = [];
  let partial = '';
  socket.on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop()!;
    lines.push(...parts);
  });
  await new Promise((resolve) => socket.once('connect', resolve));
  return { send: (line) => socket.write(`${line}\n`), lines };
}

describe('write coalescing over TCP (NDJSON)', () => {
  it('writes a lone reply before the event loop reaches its check phase', async () => {
    const { gateway } = await res.gateway();
    const client = await tcpClient(gateway);
    const { out } = await onlyTcpSession(gateway);
    const counter = logWrites(out as unknown as Record<string, unknown>);
    const seenAtCheck: number[] = [];
    gateway.method('probe', () => {
      setImmediate(() => seenAtCheck.push(counter.writes));
      return 'ok';
    });

    client.send('{"jsonrpc":"2.0","method":"probe","id":1}');
    await waitUntil(() => seenAtCheck.length === 1, 'the check phase');
    expect(seenAtCheck).toEqual([1]);
    await waitUntil(() => client.lines.length === 1, 'the reply');
    expect(JSON.parse(client.lines[0]!)).toEqual({ jsonrpc: '2.0', result: 'ok', id: 1 });
  });

  it('gathers at most 64 KiB under one cork', async () => {
    const { gateway } = await res.gateway();
    const client = await tcpClient(gateway);
    const { session, out } = await onlyTcpSession(gateway);
    // As over WebSocket: 30 lines of 10 KB, 16 of which would be 160 KB.
    const pad = 'x'.repeat(10_000);

    let uncorkedAfter = 0;
    for (let n = 1; n <= 30; n++) {
      session.notify('fill', [n, pad]);
      if (out.writableCorked === 0) uncorkedAfter++;
    }
    await waitUntil(() => client.lines.length === 30, 'all 30 lines');

    expect(client.lines.map((l) => (JSON.parse(l) as { params: [number] }).params[0])).toEqual(
      Array.from({ length: 30 }, (_, i) => i + 1),
    );
    expect(uncorkedAfter).toBeGreaterThanOrEqual(3);
  });

  it('writes every 16 small lines while the task goes on', async () => {
    const { gateway } = await res.gateway();
    const client = await tcpClient(gateway);
    const { session, out } = await onlyTcpSession(gateway);

    let uncorkedAfter = 0;
    for (let n = 1; n <= 64; n++) {
      session.notify('small', [n]);
      if (out.writableCorked === 0) uncorkedAfter++;
    }
    await waitUntil(() => client.lines.length === 64, 'all 64 lines');

    expect(client.lines.map((l) => (JSON.parse(l) as { params: [number] }).params[0])).toEqual(
      Array.from({ length: 64 }, (_, i) => i + 1),
    );
    expect(uncorkedAfter).toBe(64 / MAX_GATHERED_FRAMES);
  });
});

/**
 * An open event stream is a session: it counts against maxConnections and maxConnectionsPerIp,
 * and its socket leaves the HTTP port's socket bounds (maxHttpSockets, maxHttpSocketsPerIp) as a
 * WebSocket's does, so streams cannot fill those bounds and shut out /livez and upgrades. A
 * stream the server ends closes its connection: the socket never goes back to serving requests
 * outside the bounds. Every address in 127/8 is loopback on Linux: `localAddress` gives a test
 * many source addresses.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/index.js';
import type { GatewayOptions } from '../../src/index.js';
import { startGateway } from '../support/gateway.js';
import { Resources } from '../support/resources.js';
import { attemptUpgrade } from '../support/sockets.js';
import { waitUntil, within } from '../support/waiting.js';

const resources = new Resources();
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await resources.cleanup();
});

/** The counts the gateway keeps privately: admission slots and HTTP sockets in the gate. */
function counts(gateway: Gateway): { slots: number; httpSockets: number; sessions: number } {
  const inside = gateway as unknown as {
    admission: { connections: number };
    socketGate: { open: number };
  };
  return {
    slots: inside.admission.connections,
    httpSockets: inside.socketGate.open,
    sessions: gateway.sessions.size,
  };
}

interface RawStream {
  socket: Socket;
  /** The status line and headers, or the error that ended the socket before them. */
  head: string;
  session: { session: string; secret: string };
  /** Resolves once the socket has closed. */
  closed: Promise<void>;
}

/**
 * Open an event stream over a raw socket from `localAddress`, so that what happens to the socket
 * (kept for more requests, or closed) is the server's doing, not an HTTP agent's. Resolves once
 * the stream's first event came, or the socket ended without one (`head` says how).
 */
function openFrom(port: number, localAddress: string): Promise<RawStream> {
  const socket = connect({ port, host: '127.0.0.1', localAddress });
  cleanups.push(() => socket.destroy());
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return new Promise((resolve) => {
    let received = '';
    const stream: RawStream = { socket, head: '', session: { session: '', secret: '' }, closed };
    socket.setEncoding('utf8');
    socket.on('error', (err: NodeJS.ErrnoException) => {
      stream.head ||= `error ${err.code ?? err.message}`;
      resolve(stream);
    });
    socket.on('close', () => {
      stream.head ||= received.split('\r\n\r\n', 1)[0] || 'closed, no answer';
      resolve(stream);
    });
    socket.on('data', (chunk: string) => {
      received += chunk;
      const end = received.indexOf('\r\n\r\n');
      if (end >= 0 && !received.startsWith('HTTP/1.1 200 ')) {
        // Refused: the answer is all a test needs (the connection is otherwise kept alive).
        stream.head = received.slice(0, end);
        socket.destroy();
        return resolve(stream);
      }
      const match = /event: session\ndata: (.*)\n\n/.exec(received);
      if (!match) return;
      stream.head = received.split('\r\n\r\n', 1)[0]!;
      stream.session = JSON.parse(match[1]!) as RawStream['session'];
      resolve(stream);
    });
    socket.write('GET /rpc/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  });
}

/**
 * One request, `Connection: close`, from `localAddress` on a socket of its own (so that no agent
 * keeps it open in the gate): the status line, or what ended the socket.
 */
function requestFrom(port: number, localAddress: string, head: string): Promise<string> {
  const socket = connect({ port, host: '127.0.0.1', localAddress });
  cleanups.push(() => socket.destroy());
  return new Promise((resolve) => {
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('error', (err: NodeJS.ErrnoException) => resolve(`error ${err.code ?? ''}`));
    socket.on('close', () => resolve(received.split('\r\n', 1)[0] || 'closed, no answer'));
    socket.write(`${head}\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  });
}

const livezFrom = (port: number, localAddress: string): Promise<string> =>
  requestFrom(port, localAddress, 'GET /livez HTTP/1.1');

/** DELETE the session (the client ending it). */
const deleteSession = (port: number, session: RawStream['session']): Promise<string> =>
  requestFrom(
    port,
    '127.0.0.1',
    `DELETE /rpc/events HTTP/1.1\r\nX-Wsrpc-Session: ${session.session}\r\nX-Wsrpc-Secret: ${session.secret}`,
  );

async function sseGateway(limits: GatewayOptions<unknown>['limits']) {
  const running = await startGateway({ routes: { events: '/rpc/events' }, limits });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  return running;
}

const FROM = ['127.0.0.2', '127.0.0.3', '127.0.0.4'];

describe('event streams and the HTTP socket bounds', () => {
  it('streams past maxHttpSockets leave /livez and upgrades from any address answered', async () => {
    const { gateway, port, url } = await sseGateway({
      maxHttpSockets: 4,
      maxHttpSocketsPerIp: 2,
      maxConnections: 100,
    });
    const streams: RawStream[] = [];
    for (let i = 0; i < 12; i++) streams.push(await openFrom(port, FROM[i % FROM.length]!));
    expect(streams.map((s) => s.head.split('\r\n', 1)[0])).toEqual(
      Array(12).fill('HTTP/1.1 200 OK'),
    );
    expect(counts(gateway)).toEqual({ slots: 12, httpSockets: 0, sessions: 12 });
    expect(await livezFrom(port, '127.0.0.9')).toBe('HTTP/1.1 200 OK');
    expect(await attemptUpgrade(resources, url, { localAddress: '127.0.0.9' })).toBe('open');
    // The stream answers close their connection when they end (the socket is not reused).
    expect(streams[0]!.head.toLowerCase()).toContain('\r\nconnection: close');
  });

  it('a stream counts against maxConnectionsPerIp, with the WebSocket sessions of its address', async () => {
    const { gateway, port, url } = await sseGateway({ maxConnectionsPerIp: 3 });
    expect(await attemptUpgrade(resources, url, { localAddress: '127.0.0.5' })).toBe('open');
    expect((await openFrom(port, '127.0.0.5')).head).toMatch(/^HTTP\/1.1 200 /);
    expect((await openFrom(port, '127.0.0.5')).head).toMatch(/^HTTP\/1.1 200 /);
    expect((await openFrom(port, '127.0.0.5')).head).toMatch(/^HTTP\/1.1 429 /);
    expect(await attemptUpgrade(resources, url, { localAddress: '127.0.0.5' })).toBe(429);
    expect((await openFrom(port, '127.0.0.6')).head).toMatch(/^HTTP\/1.1 200 /);
    await waitUntil(() => counts(gateway).httpSockets === 0, 'refused sockets closed');
    expect(counts(gateway)).toEqual({ slots: 4, httpSockets: 0, sessions: 4 });
  });

  it('opening and ending many streams, each way, brings every count back to 0', async () => {
    const { gateway, port } = await sseGateway({
      maxHttpSockets: 8,
      maxConnections: 1_000,
      sseGraceMs: 10,
    });
    for (let round = 0; round < 3; round++) {
      const streams: RawStream[] = [];
      for (let i = 0; i < 30; i++) streams.push(await openFrom(port, FROM[i % FROM.length]!));
      expect(streams.every((s) => s.head.startsWith('HTTP/1.1 200 '))).toBe(true);
      expect(counts(gateway)).toEqual({ slots: 30, httpSockets: 0, sessions: 30 });
      for (const [i, stream] of streams.entries()) {
        if (i % 3 === 0) {
          // The client goes: the session waits sseGraceMs for a resume, then closes.
          stream.socket.destroy();
        } else if (i % 3 === 1) {
          // The client ends its session: the stream ends, and with it the connection.
          expect(await deleteSession(port, stream.session)).toBe('HTTP/1.1 204 No Content');
        } else {
          const session = [...gateway.sessions.values()].find(
            (s) =>
              (s.transport as unknown as { sessionId: string }).sessionId ===
              stream.session.session,
          );
          session!.close(1000, 'done');
        }
      }
      // The server closes the connection of every stream it ended.
      await within(Promise.all(streams.map((s) => s.closed)), 'every stream socket closed');
      await waitUntil(
        () =>
          JSON.stringify(counts(gateway)) ===
          JSON.stringify({ slots: 0, httpSockets: 0, sessions: 0 }),
        `counts back to 0, at ${JSON.stringify(counts(gateway))}`,
      );
    }
    expect(counts(gateway)).toEqual({ slots: 0, httpSockets: 0, sessions: 0 });
    expect(await livezFrom(port, '127.0.0.9')).toBe('HTTP/1.1 200 OK');
  });

  it('a resumed stream (GET with its session and Last-Event-ID) leaves the socket bounds too', async () => {
    const { gateway, port } = await sseGateway({ maxHttpSockets: 4, maxConnections: 1_000 });
    const streams: RawStream[] = [];
    for (let i = 0; i < 3; i++) streams.push(await openFrom(port, FROM[i]!));
    expect(counts(gateway)).toMatchObject({ httpSockets: 0, sessions: 3 });
    // Each client's stream breaks, and it resumes on a new socket; the gate never saw it go.
    const resumed = await Promise.all(
      streams.map((stream, i) => {
        const socket = connect({ port, host: '127.0.0.1', localAddress: FROM[i] });
        cleanups.push(() => socket.destroy());
        return within(
          new Promise<string>((resolve) => {
            let received = '';
            socket.setEncoding('utf8');
            socket.on('data', (chunk: string) => {
              received += chunk;
              if (received.includes('\r\n\r\n')) resolve(received.split('\r\n', 1)[0]!);
            });
            socket.write(
              `GET /rpc/events HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Wsrpc-Session: ${stream.session.session}\r\nX-Wsrpc-Secret: ${stream.session.secret}\r\nLast-Event-ID: 0\r\n\r\n`,
            );
          }),
          'the resumed stream answered',
        );
      }),
    );
    expect(resumed).toEqual(Array(3).fill('HTTP/1.1 200 OK'));
    await within(Promise.all(streams.map((s) => s.closed)), 'the replaced streams closed');
    await waitUntil(
      () => counts(gateway).httpSockets === 0,
      `no stream socket in the gate, at ${JSON.stringify(counts(gateway))}`,
    );
    expect(counts(gateway)).toMatchObject({ httpSockets: 0, sessions: 3 });
    expect(await livezFrom(port, '127.0.0.9')).toBe('HTTP/1.1 200 OK');
  });
});

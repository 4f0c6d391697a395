/**
 * What the stalled-stream tests share: a gateway whose server-side sockets can be looked at,
 * and a raw client whose event stream can stop being read (its socket paused: the kernel's
 * buffers fill, then the server's queue grows).
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import type { ServerResponse } from 'node:http';
import type { Gateway, GatewayOptions } from '../../src/index.js';
import { startGateway } from '../support/gateway.js';
import { within } from '../support/waiting.js';

export interface RawEventStream {
  /** The client's socket. */
  socket: Socket;
  /** Its local port (the server socket's remote port), kept once the socket is gone. */
  localPort: number;
  /** The status line. */
  status: string;
  /** The head's headers, lower-cased names. */
  headers: Record<string, string>;
  /** The session's id and secret (from the first event), on a 200. */
  session: { session: string; secret: string };
  /** The text read so far (the first 1 MiB of it), head included. */
  text(): string;
  /** Resolves once the client's socket has closed. */
  closed: Promise<void>;
}

const KEPT_TEXT = 1024 * 1024;

/**
 * GET the event stream on a socket of its own; resolves once the head and (on a 200) the
 * stream's first event came, or the socket closed. `stall`: stop reading right then.
 */
export function openRawStream(
  port: number,
  headers: Record<string, string> = {},
  { stall = false }: { stall?: boolean } = {},
): Promise<RawEventStream> {
  const socket = connect({ port, host: '127.0.0.1' });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  let received = '';
  return within(
    new Promise((resolve) => {
      const stream: RawEventStream = {
        socket,
        localPort: 0,
        status: '',
        headers: {},
        session: { session: '', secret: '' },
        text: () => received,
        closed,
      };
      let settled = false;
      const settle = (): void => {
        if (settled) return;
        settled = true;
        const head = received.split('\r\n\r\n', 1)[0]!;
        const [status, ...lines] = head.split('\r\n');
        stream.status = status ?? '';
        for (const line of lines) {
          const colon = line.indexOf(':');
          stream.headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
        }
        if (stall) socket.pause();
        resolve(stream);
      };
      socket.setEncoding('utf8');
      socket.once('connect', () => (stream.localPort = socket.localPort!));
      socket.on('error', () => undefined);
      socket.on('close', settle);
      socket.on('data', (chunk: string) => {
        if (received.length < KEPT_TEXT) received += chunk;
        if (settled) return;
        const end = received.indexOf('\r\n\r\n');
        if (end < 0) return;
        if (!received.startsWith('HTTP/1.1 200 ')) {
          if (/content-length: (\d+)/i.exec(received) === null) return settle();
          const length = Number(/content-length: (\d+)/i.exec(received)![1]);
          if (Buffer.byteLength(received.slice(end + 4)) >= length) settle();
          return;
        }
        const match = /event: session\ndata: (.*)\n\n/.exec(received);
        if (!match) return;
        stream.session = JSON.parse(match[1]!) as RawEventStream['session'];
        settle();
      });
      const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
      socket.write(`GET /rpc/events HTTP/1.1\r\nHost: 127.0.0.1\r\n${lines.join('')}\r\n`);
    }),
    'the event stream answered',
  );
}

/** One request on a socket of its own (Connection: close): its status line. */
export function requestStatus(port: number, head: string): Promise<string> {
  const socket = connect({ port, host: '127.0.0.1' });
  return within(
    new Promise((resolve) => {
      let received = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (received += chunk));
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(received.split('\r\n', 1)[0] || 'closed, no answer'));
      socket.write(`${head}\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
    }),
    'the request answered',
  );
}

/** DELETE the session (a client ending it): the status line. */
export const deleteSession = (
  port: number,
  session: { session: string; secret: string },
): Promise<string> =>
  requestStatus(
    port,
    `DELETE /rpc/events HTTP/1.1\r\nX-Wsrpc-Session: ${session.session}\r\nX-Wsrpc-Secret: ${session.secret}`,
  );

/** The headers of a resume, `lastEventId` omitted when undefined. */
export function resumeOf(
  session: { session: string; secret: string },
  lastEventId?: number,
): Record<string, string> {
  return {
    'X-Wsrpc-Session': session.session,
    'X-Wsrpc-Secret': session.secret,
    ...(lastEventId === undefined ? {} : { 'Last-Event-ID': String(lastEventId) }),
  };
}

/** What an SSE transport keeps privately and a test looks at. */
interface SseInside {
  sessionId: string;
  stream: ServerResponse | undefined;
  budgetBytes: number;
  replayKeptBytes: number;
  isClosed: boolean;
}

export interface StalledStreamsGateway {
  gateway: Gateway;
  port: number;
  /** The server's socket of a client's stream (by the client's port). */
  serverSocketOf(client: { localPort: number }): Socket;
  /** The SSE transport of a session id, while the session is open. */
  transportOf(sessionId: string): SseInside | undefined;
  /** Notify the session until its stream's socket queues at least `bytes` (bounded). */
  fillUntilQueued(sessionId: string, bytes: number): Promise<void>;
}

export async function stalledStreamsGateway(
  limits: GatewayOptions<unknown>['limits'] = {},
): Promise<StalledStreamsGateway> {
  const { gateway, port } = await startGateway({ routes: { events: '/rpc/events' }, limits });
  const serverSockets = new Map<number, Socket>();
  gateway.httpServer.on('connection', (socket: Socket) => {
    serverSockets.set(socket.remotePort!, socket);
  });
  const transportOf = (sessionId: string): SseInside | undefined => {
    for (const session of gateway.sessions.values()) {
      const transport = session.transport as unknown as SseInside;
      if (transport.sessionId === sessionId) return transport;
    }
    return undefined;
  };
  return {
    gateway,
    port,
    serverSocketOf(client) {
      const socket = serverSockets.get(client.localPort);
      if (!socket) throw new Error(`no server socket for port ${client.localPort}`);
      return socket;
    },
    transportOf,
    async fillUntilQueued(sessionId, bytes) {
      const big = 'q'.repeat(256 * 1024);
      for (let i = 0; i < 128; i++) {
        const transport = transportOf(sessionId);
        const socket = transport?.stream?.socket;
        if (!socket || socket.writableLength >= bytes) return;
        const session = [...gateway.sessions.values()].find(
          (s) => (s.transport as unknown) === transport,
        );
        session!.notify('big', [big]);
        await new Promise((resolve) => setImmediate(resolve));
      }
      throw new Error(`the stream of ${sessionId} did not queue ${bytes} bytes`);
    },
  };
}

/** Two turns of the event loop: what the server does at the end of a turn has been done. */
export async function settleTurns(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
}

import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import type { Socket } from 'node:net';

/** A raw TCP connection to a gateway's HTTP port, as rawTcpSocket opened it. */
export interface RawTcpSocket {
  /** The loopback address it was opened from. */
  readonly from: string;
  socket: Socket;
  /** Resolves once the socket has closed (refused, cut, or answered and closed). */
  closed: Promise<void>;
  isClosed(): boolean;
  /** Everything the server wrote. */
  received(): string;
}

/**
 * A TCP connection to 127.0.0.1:`port` from `from` that writes `text` (if any) once connected
 * and then waits; pushed on `opened`, for the test to destroy.
 */
export async function rawTcpSocket(
  opened: Socket[],
  port: number,
  from: string,
  text = '',
): Promise<RawTcpSocket> {
  const socket = connect({ port, host: '127.0.0.1', localAddress: from });
  opened.push(socket);
  let isClosed = false;
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (received += chunk));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) =>
    socket.once('close', () => {
      isClosed = true;
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => {
      if (text) socket.write(text);
      resolve();
    });
    socket.once('close', () => reject(new Error(`${from} closed before connecting`)));
  });
  return { from, socket, closed, isClosed: () => isClosed, received: () => received };
}

/** GET `path` from `from` on a fresh connection: the status, or the error's code. */
export function getStatusFrom(
  port: number,
  path: string,
  from = '127.0.0.1',
): Promise<number | string> {
  return new Promise((resolve) => {
    const req = httpRequest(
      { host: '127.0.0.1', port, path, localAddress: from, agent: false },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    req.end();
  });
}

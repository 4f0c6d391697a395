/**
 * A bare `ws` server on loopback standing in for a server the code under test talks to (a
 * hostile one, one that writes what a test needs): each message's text goes to `onMessage` with
 * its socket. Its stop (every client cut, then the server closed) goes on `cleanups`.
 */
import { WebSocketServer } from 'ws';
import type { ServerOptions, WebSocket } from 'ws';

export async function rawWsServer(
  cleanups: (() => unknown)[],
  onMessage: (socket: WebSocket, text: string) => void,
  options: ServerOptions = {},
): Promise<string> {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1', ...options });
  cleanups.push(() => {
    for (const client of server.clients) client.terminate();
    return new Promise((resolve) => server.close(resolve));
  });
  await new Promise((resolve) => server.once('listening', resolve));
  server.on('connection', (socket) => {
    socket.on('error', () => undefined);
    socket.on('message', (data: Buffer) => onMessage(socket, data.toString('utf8')));
  });
  const { port } = server.address() as { port: number };
  return `ws://127.0.0.1:${port}`;
}

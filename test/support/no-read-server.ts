/**
 * A hostile server for the client's read bound (`maxBufferedBytes`): it sends requests whose
 * answers are large (each id is 16 KiB, echoed in the client's -32601 answer) and reads nothing
 * until told to, over `ws` or over TCP as newline-delimited JSON.
 */
import { createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';

/** Each request's id, echoed in its -32601 answer: the answers are what piles up. */
export const BIG_ID = 'i'.repeat(16 * 1024);
/** Bytes the server keeps queued on its own side, at most, before it waits. */
const SERVER_QUEUE = 512 * 1024;
/** Past a client's bound by at most what one read from the network can hold (a 64 KiB chunk's answers). */
export const READ_SLACK = 64 * 1024 + 4 * (BIG_ID.length + 100);

const request = (n: number): string => `{"jsonrpc":"2.0","method":"m","id":"${BIG_ID}${n}"}`;

/** One connection of the server: what it sent, the answers it has read, and the switch to read. */
export interface NoReadServer {
  url: string;
  sent(): number;
  answers(): number;
  startReading(): void;
}

/** Calls `pump` again a moment later while it has more to send (not in a tight loop). */
const again = (pump: () => void): void => void setTimeout(pump, 1);

/**
 * A `ws` server that pauses its socket (reads nothing) and sends `requests` requests; `cleanups`
 * gets what closes it.
 */
export async function wsNoReadServer(
  requests: number,
  cleanups: (() => unknown)[],
): Promise<NoReadServer & { socket(): WebSocket | undefined }> {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  cleanups.push(() => {
    for (const client of server.clients) client.terminate();
    return new Promise((resolve) => server.close(resolve));
  });
  await new Promise((resolve) => server.once('listening', resolve));
  let sent = 0;
  let answers = 0;
  let socket: WebSocket | undefined;
  let raw: Socket | undefined;
  server.on('connection', (ws) => {
    socket = ws;
    raw = (ws as unknown as { _socket: Socket })._socket;
    raw.pause();
    ws.on('message', () => answers++);
    const pump = (): void => {
      if (ws.readyState !== WebSocket.OPEN) return;
      while (sent < requests && ws.bufferedAmount < SERVER_QUEUE) ws.send(request(sent++));
      if (sent < requests) again(pump);
    };
    pump();
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}`,
    sent: () => sent,
    answers: () => answers,
    startReading: () => raw!.resume(),
    socket: () => socket,
  };
}

/** The same over TCP, newline-delimited JSON: a net server that does not read until told to. */
export async function tcpNoReadServer(
  requests: number,
  cleanups: (() => unknown)[],
): Promise<NoReadServer> {
  let sent = 0;
  let answers = 0;
  let socket: Socket | undefined;
  const server: Server = createServer((sock) => {
    socket = sock;
    sock.on('error', () => undefined);
    const pump = (): void => {
      if (sock.destroyed) return;
      while (sent < requests && sock.writableLength < SERVER_QUEUE)
        sock.write(`${request(sent++)}\n`);
      if (sent < requests) again(pump);
    };
    pump();
  });
  cleanups.push(() => {
    socket?.destroy();
    return new Promise((resolve) => server.close(resolve));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `tcp://127.0.0.1:${port}`,
    sent: () => sent,
    answers: () => answers,
    startReading: () => {
      let text = '';
      socket!.setEncoding('utf8');
      socket!.on('data', (chunk: string) => {
        text += chunk;
        const lines = text.split('\n');
        text = lines.pop()!;
        answers += lines.length;
      });
    },
  };
}

/**
 * Servers for the CLI to talk to that answer as a test needs (what no gateway would send), over
 * real loopback sockets: each is stopped by a function pushed on `cleanups` (every connection
 * cut, then the server closed).
 */
import { createHash } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, beforeAll } from 'vitest';
import { listenOnLoopback } from '../support/network.js';
import { rawWsServer } from '../support/raw-ws-server.js';
import { CliResources, ensureCliBuilt } from './cli-harness.js';

export type Cleanups = (() => unknown)[];

/** What the server answers one message's text with: a frame (line, body), or nothing. */
export type Answer = (text: string) => string | undefined;

/** The `id` of a request's text, as JSON writes it (for an answer that names it). */
export function idOf(text: string): string {
  return JSON.stringify((JSON.parse(text) as { id?: unknown }).id ?? null);
}

/** A WebSocket server answering each message with `answer`'s frame; its ws:// URL. */
export async function answeringWs(cleanups: Cleanups, answer: Answer): Promise<string> {
  const url = await rawWsServer(cleanups, (socket, text) => {
    const frame = answer(text);
    if (frame !== undefined) socket.send(frame);
  });
  return `${url}/rpc`;
}

/**
 * A newline-delimited JSON server answering each line with `answer`'s line; its tcp:// URL.
 * With `holdOpen`, the server never ends or closes a connection, even after the client ended its
 * side (a server that never closes).
 */
export async function answeringTcp(
  cleanups: Cleanups,
  answer: Answer,
  events: { connected?: () => void; holdOpen?: boolean } = {},
): Promise<string> {
  const sockets = new Set<Socket>();
  const server = createNetServer({ allowHalfOpen: events.holdOpen ?? false }, (socket) => {
    events.connected?.();
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let held = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      held += chunk;
      let newline: number;
      while ((newline = held.indexOf('\n')) >= 0) {
        const line = held.slice(0, newline);
        held = held.slice(newline + 1);
        const reply = answer(line);
        if (reply !== undefined) socket.write(`${reply}\n`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise((resolve) => server.close(resolve));
  });
  const { port } = server.address() as { port: number };
  return `tcp://127.0.0.1:${port}`;
}

/** An HTTP server answering each POST's body with 200 and `answer`'s body; its http:// URL. */
export async function answeringHttp(cleanups: Cleanups, answer: Answer): Promise<string> {
  const server = createHttpServer((request, response) => {
    let body = '';
    request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      const reply = answer(body);
      if (reply === undefined) response.writeHead(204).end();
      else response.writeHead(200, { 'content-type': 'application/json' }).end(reply);
    });
  });
  const { port, close } = await listenOnLoopback(server);
  cleanups.push(close);
  return `http://127.0.0.1:${port}/rpc`;
}

/**
 * A server that accepts the WebSocket upgrade (101, done by hand) and then says nothing: no
 * answer, and no answer to a close frame either. `connected` is told at each upgrade.
 */
export async function silentWs(cleanups: Cleanups, connected: () => void): Promise<string> {
  const sockets = new Set<Socket>();
  const server = createHttpServer();
  server.on('upgrade', (request, socket: Socket) => {
    connected();
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.resume(); // read and ignore everything, the close frame included
    const key = request.headers['sec-websocket-key'] ?? '';
    const accept = createHash('sha1')
      .update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
      .digest('base64');
    const protocol = request.headers['sec-websocket-protocol'];
    socket.write(
      [
        'HTTP/1.1 101 Switching Protocols',
        'Upgrade: websocket',
        'Connection: Upgrade',
        `Sec-WebSocket-Accept: ${accept}`,
        ...(protocol === undefined ? [] : [`Sec-WebSocket-Protocol: ${protocol.split(',')[0]}`]),
        '',
        '',
      ].join('\r\n'),
    );
  });
  const { port, close } = await listenOnLoopback(server);
  cleanups.push(() => {
    for (const socket of sockets) socket.destroy();
    return close();
  });
  return `ws://127.0.0.1:${port}/rpc`;
}

/**
 * A test file's CLI runs and raw servers, each test's cleaned up after it (the servers in the
 * reverse order they were made), with the CLI built before the file's first test.
 */
export function cliWithServers(): { resources: CliResources; cleanups: Cleanups } {
  const resources = new CliResources();
  const cleanups: Cleanups = [];
  beforeAll(ensureCliBuilt, 180_000);
  afterEach(async () => {
    await resources.cleanup();
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  return { resources, cleanups };
}

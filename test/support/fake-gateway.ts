/**
 * A fake gateway for the client's tests: a plain `ws` server on loopback that each test scripts
 * per connection, the clients made against it, and the frame helpers to read what a client sent
 * and to answer it. One `FakeGateways` per test file holds what it made; its `cleanup()` goes in
 * the file's afterEach.
 */
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Subscription } from 'rxjs';
import { WebSocket, WebSocketServer } from 'ws';
import { createClient } from '../../src/client/index.js';
import type { ClientOptions, RpcClient } from '../../src/client/index.js';

/** A JSON-RPC request, notification or response as the client sends it. */
export interface ClientFrame {
  jsonrpc?: string;
  id?: number | string;
  method?: string;
  params?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

/** A scripted server: its url, and each connection's socket in the order they came. */
export interface FakeGateway {
  url: string;
  sockets: WebSocket[];
}

/** Called for the n-th connection (from 1), with the upgrade request it came with. */
export type OnConnection = (socket: WebSocket, n: number, request: IncomingMessage) => void;

export class FakeGateways {
  readonly servers: WebSocketServer[] = [];
  readonly clients: RpcClient[] = [];
  /** Subscriptions a test makes, unsubscribed by `cleanup()` before the clients close. */
  readonly subscriptions: Subscription[] = [];

  /**
   * @param clientDefaults options of every `client()` (after `WebSocket` and `heartbeat: false`,
   *   before the call's own options).
   */
  constructor(private readonly clientDefaults: Partial<ClientOptions> = {}) {}

  /** A `ws` server on 127.0.0.1 (a free port, path /rpc) that calls `onConnection` for each. */
  async listen(onConnection: OnConnection): Promise<FakeGateway> {
    const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    this.servers.push(server);
    await new Promise((resolve) => server.once('listening', resolve));
    const sockets: WebSocket[] = [];
    server.on('connection', (socket, request) => {
      sockets.push(socket);
      onConnection(socket, sockets.length, request);
    });
    const { port } = server.address() as AddressInfo;
    return { url: `ws://127.0.0.1:${port}/rpc`, sockets };
  }

  /** A client with the `ws` WebSocket, no heartbeat and the defaults given, closed by `cleanup()`. */
  client(options: ClientOptions): RpcClient {
    const made = createClient({
      WebSocket,
      heartbeat: false,
      ...this.clientDefaults,
      ...options,
    });
    this.clients.push(made);
    return made;
  }

  /** Unsubscribes the subscriptions, closes the clients, then ends and closes the servers. */
  async cleanup(): Promise<void> {
    for (const s of this.subscriptions.splice(0)) s.unsubscribe();
    await Promise.all(this.clients.splice(0).map((c) => c.close()));
    for (const server of this.servers.splice(0)) {
      for (const socket of server.clients) socket.terminate();
      await new Promise((resolve) => server.close(resolve));
    }
  }
}

/** The frame (single or batch) a client sent, parsed as it is. */
export function frameOf<T = ClientFrame>(data: unknown): T {
  return JSON.parse((data as Buffer).toString('utf8')) as T;
}

/** Each request (or response) of a frame (single or batch) the client sent. */
export function framesOf(data: unknown): ClientFrame[] {
  const parsed = frameOf<ClientFrame | ClientFrame[]>(data);
  return Array.isArray(parsed) ? parsed : [parsed];
}

/** Sends `frame` with `jsonrpc: '2.0'`. */
export function send(socket: WebSocket, frame: object): void {
  socket.send(JSON.stringify({ jsonrpc: '2.0', ...frame }));
}

/** Answers request `id` with `result`. */
export function reply(socket: WebSocket, id: unknown, result: unknown): void {
  send(socket, { result, id });
}

/** A `subscription` notification with `params`. */
export function note(socket: WebSocket, params: Record<string, unknown>): void {
  send(socket, { method: 'subscription', params });
}

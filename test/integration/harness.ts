import { connect } from 'node:net';
import type { Socket, createServer } from 'node:net';
import type { ChildProcess } from 'node:child_process';
import { distinctUntilChanged, filter, firstValueFrom, tap, toArray } from 'rxjs';
import { WebSocket } from 'ws';
import type { ClientOptions } from '../../src/client/client.js';
import type { RpcClient } from '../../src/client/client.js';
import type { ConnectionState } from '../../src/client/connection-state.js';
import type { CloseOptions } from '../../src/server/gateway.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { registerDemoService } from '../../demo/service.js';
import { connectClient, openRawSocket, startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { killChild } from '../support/processes.js';
export { freePort } from '../support/network.js';

type RawSocket = Awaited<ReturnType<typeof openRawSocket>>;

/**
 * Everything a test opens, so `cleanup()` in afterEach can close it all, in
 * order: clients first (so gateways do not wait on them), then sockets, then
 * gateways, then child processes.
 */
export class Resources {
  readonly clients: RpcClient[] = [];
  readonly gateways: { close(options?: CloseOptions): Promise<void> }[] = [];
  readonly sockets: WebSocket[] = [];
  readonly netSockets: Socket[] = [];
  readonly netServers: ReturnType<typeof createServer>[] = [];
  readonly children: ChildProcess[] = [];

  async gateway<C = unknown>(options: GatewayOptions<C> = {}, port = 0) {
    const running = await startGateway<C>(options, port);
    this.gateways.push(running.gateway);
    return running;
  }

  /** A gateway with the demo service registered. */
  async demoGateway(options: GatewayOptions<unknown> = {}, port = 0): Promise<RunningGateway> {
    const running = await this.gateway<unknown>(options, port);
    registerDemoService(running.gateway);
    return running;
  }

  client(url: string | string[], options: Partial<ClientOptions> = {}): RpcClient {
    const client = connectClient(url, options);
    this.clients.push(client);
    return client;
  }

  async raw(url: string, protocols?: string | string[]): Promise<RawSocket> {
    const raw = await openRawSocket(url, protocols);
    this.sockets.push(raw.socket);
    return raw;
  }

  /** Track a `ws` socket created by the test itself. */
  track(socket: WebSocket): WebSocket {
    this.sockets.push(socket);
    return socket;
  }

  async cleanup(): Promise<void> {
    await Promise.all(this.clients.splice(0).map((c) => c.close()));
    await Promise.all(
      this.sockets.splice(0).map(
        (socket) =>
          new Promise<void>((resolve) => {
            if (socket.readyState === WebSocket.CLOSED) return resolve();
            socket.once('close', () => resolve());
            socket.on('error', () => undefined);
            socket.terminate();
          }),
      ),
    );
    for (const socket of this.netSockets.splice(0)) socket.destroy();
    await Promise.all(
      this.netServers
        .splice(0)
        .map((server) => new Promise<void>((resolve) => server.close(() => resolve()))),
    );
    await Promise.all(this.gateways.splice(0).map((g) => g.close({ timeoutMs: 1_000 })));
    await Promise.all(this.children.splice(0).map((child) => killChild(child)));
  }
}

/** Resolves once the client reaches `state` (at once if it is already there). */
export function waitForState(client: RpcClient, state: ConnectionState): Promise<ConnectionState> {
  return firstValueFrom(client.state$.pipe(filter((s) => s === state)));
}

/** Every distinct state the client goes through until it completes (on close). */
export function recordStates(client: RpcClient): {
  states: ConnectionState[];
  done: Promise<ConnectionState[]>;
} {
  const states: ConnectionState[] = [];
  const done = firstValueFrom(
    client.state$.pipe(
      distinctUntilChanged(),
      tap((s) => states.push(s)),
      toArray(),
    ),
  );
  return { states, done };
}

/** The error a promise rejects with; fails if it fulfils. Attach it at once to avoid unhandled rejections. */
export function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
    },
    (err: unknown) => err,
  );
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A promise with its resolver, for handlers that must wait on the test. */
export function deferred<T = void>(): {
  promise: Promise<T>;
  resolve: (value: T) => void;
} {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** A server handler that never answers on its own: it rejects when its call is aborted. */
export function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise<never>((_resolve, reject) => {
    if (signal.aborted) reject(signal.reason as Error);
    signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
  });
}

export interface UpgradeOutcome {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * Try a WebSocket upgrade with `ws` and report the HTTP response that refused
 * it (the 'unexpected-response' event). Rejects if the upgrade succeeds.
 */
export function upgradeRefusal(
  resources: Resources,
  url: string,
  protocols?: string | string[],
  headers?: Record<string, string>,
): Promise<UpgradeOutcome> {
  const socket = resources.track(new WebSocket(url, protocols, headers ? { headers } : {}));
  return new Promise<UpgradeOutcome>((resolve, reject) => {
    socket.on('error', () => undefined);
    socket.once('open', () => reject(new Error('upgrade unexpectedly succeeded')));
    socket.once('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.once('end', () => {
        const outcome = {
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        };
        socket.once('close', () => resolve(outcome));
        socket.terminate();
      });
    });
  });
}

/** Resolves with the close code and reason of a `ws` socket. */
export function closeOf(socket: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise((resolve) => {
    if (socket.readyState === WebSocket.CLOSED) return resolve({ code: 1006, reason: '' });
    socket.once('close', (code, reason) => resolve({ code, reason: reason.toString('utf8') }));
  });
}

/**
 * A WebSocket client done by hand over TCP: it completes the handshake and
 * then never answers anything, in particular not the server's close frame.
 */
export async function silentWebSocket(
  resources: Resources,
  port: number,
  path = '/rpc',
): Promise<{ socket: Socket; nextData: () => Promise<Buffer> }> {
  const socket = connect(port, '127.0.0.1');
  resources.netSockets.push(socket);
  socket.on('error', () => undefined);
  const chunks: Buffer[] = [];
  const waiters: (() => void)[] = [];
  socket.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    for (const w of waiters.splice(0)) w();
  });
  const nextData = async (): Promise<Buffer> => {
    while (chunks.length === 0) await new Promise<void>((r) => waiters.push(r));
    return chunks.shift()!;
  };
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(
    [
      `GET ${path} HTTP/1.1`,
      `Host: 127.0.0.1:${port}`,
      'Upgrade: websocket',
      'Connection: Upgrade',
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
      'Sec-WebSocket-Version: 13',
      '',
      '',
    ].join('\r\n'),
  );
  const head = (await nextData()).toString('latin1');
  if (!head.startsWith('HTTP/1.1 101')) throw new Error(`handshake failed: ${head}`);
  return { socket, nextData };
}

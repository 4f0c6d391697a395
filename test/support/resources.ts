import type { Socket, createServer } from 'node:net';
import type { ChildProcess } from 'node:child_process';
import { WebSocket } from 'ws';
import type { ClientOptions } from '../../src/client/client.js';
import type { RpcClient } from '../../src/client/client.js';
import type { CloseOptions } from '../../src/server/gateway.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { registerDemoService } from '../../demo/service.js';
import { connectClient, openRawSocket, startGateway } from './gateway.js';
import type { RunningGateway } from './gateway.js';
import { killChild } from './processes.js';
import { RawRpc } from './raw-rpc.js';

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

  /** A RawRpc client (request/until/notifications) on `url`, closed with the other sockets. */
  async rawRpc(url: string): Promise<RawRpc> {
    const client = await RawRpc.open(url);
    this.sockets.push(client.socket);
    return client;
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

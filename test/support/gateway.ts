import { WebSocket } from 'ws';
import { createGateway } from '../../src/server/gateway.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { Session } from '../../src/server/session.js';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { silentLogger } from '../../src/peer/logger.js';
import { RpcClient } from '../../src/client/client.js';
import type { ClientOptions } from '../../src/client/client.js';

export interface RunningGateway<C = unknown> {
  gateway: Gateway<C>;
  port: number;
  url: string;
  httpUrl: string;
}

/** A gateway on an ephemeral loopback port with a silent logger. */
export async function startGateway<C = unknown>(
  options: GatewayOptions<C> = {},
  port = 0,
): Promise<RunningGateway<C>> {
  const gateway = createGateway<C>({ logger: silentLogger, heartbeatIntervalMs: 0, ...options });
  const address = await gateway.listen(port, '127.0.0.1');
  return {
    gateway,
    port: address.port,
    url: `ws://127.0.0.1:${address.port}/rpc`,
    httpUrl: `http://127.0.0.1:${address.port}`,
  };
}

/** A Node client using `ws`, with fast reconnects for tests. */
export function connectClient(
  url: string | string[],
  options: Partial<ClientOptions> = {},
): RpcClient {
  return new RpcClient({
    url,
    WebSocket,
    reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
    ...options,
  });
}

/** A raw `ws` socket, open, with every text frame it receives collected. */
export async function openRawSocket(url: string, protocols?: string | string[]) {
  const socket = new WebSocket(url, protocols);
  const frames: string[] = [];
  const waiters: (() => void)[] = [];
  socket.on('message', (data) => {
    frames.push((data as Buffer).toString('utf8'));
    for (const w of waiters.splice(0)) w();
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  return {
    socket,
    frames,
    /** Resolves once `count` frames in total have arrived. */
    async waitFor(count: number): Promise<string[]> {
      while (frames.length < count) await new Promise<void>((r) => waiters.push(r));
      return frames;
    },
    close: () => socket.close(),
  };
}

/** The gateway session opened since `before` (a snapshot of session ids). */
export function newSession<C>(gateway: Gateway<C>, before: ReadonlySet<string>): Session<C> {
  const fresh = [...gateway.sessions.values()].filter((s) => !before.has(s.id));
  if (fresh.length !== 1) throw new Error(`expected one new session, found ${fresh.length}`);
  return fresh[0]!;
}

export function sessionIds<C>(gateway: Gateway<C>): Set<string> {
  return new Set(gateway.sessions.keys());
}

/**
 * How many messages `transport` has handed its session so far: its listener's `receive` is
 * wrapped to count them (for the input-budget tests, which count what was handled before
 * reading paused).
 */
export function countHandled(transport: WsTransport): { count: number } {
  const listener = (transport as unknown as { listener: { receive(text: string): void } }).listener;
  const handled = { count: 0 };
  const receive = listener.receive.bind(listener);
  listener.receive = (text) => {
    handled.count++;
    receive(text);
  };
  return handled;
}

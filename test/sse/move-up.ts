/**
 * A gateway with an events route and a client on fallbackSocket whose WebSocket is blocked until
 * `unblock()`: the client starts on the event stream, and moves back up once unblocked.
 */
import { WebSocket } from 'ws';
import { RpcClient } from '../../src/client/client.js';
import { fallbackSocket } from '../../src/client/sse-transport.js';
import { deferred } from '../support/promises.js';
import type { Deferred } from '../support/promises.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';

/**
 * A WebSocket class that a proxy blocks until `unblock()` (its upgrades answered 404, as a
 * proxy that refuses them would); counts the ones that open.
 */
function blockableWebSocket() {
  let blocked = true;
  let opened = 0;
  class Blockable extends WebSocket {
    constructor(url: string, protocols?: string | string[], init?: object) {
      super(blocked ? url.replace(/\/rpc$/, '/blocked') : url, protocols, init);
      this.addEventListener('open', () => opened++);
    }
  }
  return {
    WebSocket: Blockable,
    unblock: () => (blocked = false),
    get opened() {
      return opened;
    },
  };
}

/** A call's outcome, as text: what it resolved with, or the error it rejected with. */
export function outcome(call: Promise<unknown>): Promise<string> {
  return call.then(
    (value) => `resolved ${String(value)}`,
    (err: Error) => `rejected ${err.name}: ${err.message}`,
  );
}

export const kinds = (gateway: {
  sessions: ReadonlyMap<string, { transport: { kind: string } }>;
}) => [...gateway.sessions.values()].map((session) => session.transport.kind);

/** A call the server holds until the test answers it; `aborted` when its handler was aborted. */
export interface HeldCall {
  params: unknown;
  answer: Deferred<string>;
  aborted: boolean;
}

export interface MoveUpSetUp extends RunningGateway {
  rpc: RpcClient;
  /** The calls to `held`, in the order the server took them. */
  held: HeldCall[];
  /** The proxy: `unblock()` lets WebSocket through; `opened` counts the ones that opened. */
  blockable: { unblock(): void; readonly opened: number };
}

export async function moveUpSetUp(cleanups: (() => unknown)[]): Promise<MoveUpSetUp> {
  const running = await startGateway({ routes: { events: '/rpc/events' } });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  const { gateway } = running;
  gateway.topic('feed');
  const held: HeldCall[] = [];
  gateway.method('held', (params, ctx) => {
    const entry = { params, answer: deferred<string>(), aborted: false };
    ctx.signal.addEventListener('abort', () => (entry.aborted = true));
    held.push(entry);
    return entry.answer.promise;
  });
  gateway.method('add', ([a, b]: [number, number]) => a + b);
  gateway.method('ask', async (_params, ctx) => ctx.session.call('client.name', []));
  const blockable = blockableWebSocket();
  const rpc = new RpcClient({
    url: running.url,
    WebSocket: fallbackSocket({ WebSocket: blockable.WebSocket, probeDelayMs: 20 }),
    reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
    heartbeat: false,
  });
  rpc.method('client.name', () => 'moving');
  cleanups.push(() => rpc.close());
  await rpc.opened();
  return { ...running, rpc, held, blockable };
}

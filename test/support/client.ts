import { filter, firstValueFrom, distinctUntilChanged, tap, toArray } from 'rxjs';
import type { Observable, Subscription } from 'rxjs';
import { WebSocket } from 'ws';
import type { RpcClient } from '../../src/client/client.js';
import type { ConnectionState } from '../../src/client/connection-state.js';
import type { WebSocketConstructor } from '../../src/transport/websocket-transport.js';
import type { GatewayOptions } from '../../src/server/options.js';
import type { RunningGateway } from './gateway.js';
import type { WireFrame } from './raw-rpc.js';
import type { Resources } from './resources.js';

/** A `ws` WebSocket class that records every frame the client sends. */
export function recordingWebSocket(sent: WireFrame[]): WebSocketConstructor {
  return class RecordingWebSocket extends WebSocket {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols);
      const send = this.send.bind(this) as (data: string) => void;
      this.send = ((data: string) => {
        const parsed = JSON.parse(data) as WireFrame | WireFrame[];
        for (const frame of Array.isArray(parsed) ? parsed : [parsed]) sent.push(frame);
        send(data);
      }) as typeof this.send;
    }
  };
}

/** A gateway with a `sum` method (the demo service is not needed by these tests). */
export async function sumGateway(
  res: Resources,
  options: GatewayOptions<unknown> = {},
  port = 0,
): Promise<RunningGateway> {
  const running = await res.gateway<unknown>(options, port);
  running.gateway.method('sum', (params) =>
    (params as number[]).reduce((total, n) => total + n, 0),
  );
  return running;
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

/**
 * Record what an Observer of `source` gets: its events, its errors, and whether it completed
 * (`done`). Its Subscription is pushed to `keep`, for the test to end afterwards.
 */
export function observeEvents<T>(source: Observable<T>, keep: Subscription[]) {
  const seen = { events: [] as T[], errors: [] as unknown[], done: false };
  keep.push(
    source.subscribe({
      next: (e) => seen.events.push(e),
      error: (err: unknown) => seen.errors.push(err),
      complete: () => (seen.done = true),
    }),
  );
  return seen;
}

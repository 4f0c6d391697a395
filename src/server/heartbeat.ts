import type { ServerTransport } from '../transport/transport.js';
import { WsTransport } from '../transport/ws-transport.js';

/**
 * Pings every watched socket on an interval and terminates those that did not
 * answer the previous ping (the `ws` sweep): a half-open TCP connection is found
 * within two intervals. It keeps no list of its own: it sweeps the gateway's
 * sessions, and a transport's `alive` flag (set by its pong) says who answered.
 */
export class Heartbeat {
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    intervalMs: number,
    private readonly watched: ReadonlyMap<unknown, { readonly transport: ServerTransport }>,
    private readonly onDead: (transport: WsTransport) => void,
  ) {
    if (intervalMs > 0) {
      this.timer = setInterval(() => this.sweep(), intervalMs);
      this.timer.unref();
    }
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private sweep(): void {
    for (const { transport } of this.watched.values()) {
      // TCP and stdio have no ping frame (their clients send rpc.ping); HTTP exchanges are brief.
      if (!(transport instanceof WsTransport)) continue;
      if (!transport.alive) {
        this.onDead(transport);
        continue;
      }
      transport.alive = false;
      transport.socket.ping();
    }
  }
}

import type { WebSocket } from 'ws';

/**
 * Pings every socket on an interval and terminates those that did not answer
 * the previous ping (the `ws` sweep): a half-open TCP connection is found
 * within two intervals.
 */
export class Heartbeat {
  private readonly alive = new WeakMap<WebSocket, boolean>();
  private readonly sockets = new Set<WebSocket>();
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly intervalMs: number,
    private readonly onDead: (socket: WebSocket) => void,
  ) {
    if (intervalMs > 0) {
      this.timer = setInterval(() => this.sweep(), intervalMs);
      this.timer.unref();
    }
  }

  watch(socket: WebSocket): void {
    if (!this.timer) return;
    this.sockets.add(socket);
    this.alive.set(socket, true);
    socket.on('pong', () => this.alive.set(socket, true));
    socket.once('close', () => this.sockets.delete(socket));
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.sockets.clear();
  }

  private sweep(): void {
    for (const socket of this.sockets) {
      if (!this.alive.get(socket)) {
        this.sockets.delete(socket);
        this.onDead(socket);
        continue;
      }
      this.alive.set(socket, false);
      socket.ping();
    }
  }
}

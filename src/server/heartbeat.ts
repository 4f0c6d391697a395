import type { WebSocket } from 'ws';

const ALIVE = Symbol('alive');
type Watched = WebSocket & { [ALIVE]: boolean };

// One shared listener (ws calls it with `this` = the socket), not a closure per connection.
function onPong(this: WebSocket): void {
  (this as Watched)[ALIVE] = true;
}

/**
 * Pings every socket on an interval and terminates those that did not answer
 * the previous ping (the `ws` sweep): a half-open TCP connection is found
 * within two intervals.
 */
export class Heartbeat {
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
    (socket as Watched)[ALIVE] = true;
    socket.on('pong', onPong);
  }

  /** Stop watching a closed socket. */
  unwatch(socket: WebSocket): void {
    this.sockets.delete(socket);
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.sockets.clear();
  }

  private sweep(): void {
    for (const socket of this.sockets) {
      if (!(socket as Watched)[ALIVE]) {
        this.sockets.delete(socket);
        this.onDead(socket);
        continue;
      }
      (socket as Watched)[ALIVE] = false;
      socket.ping();
    }
  }
}

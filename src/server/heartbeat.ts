import { randomBytes } from 'node:crypto';
import { CloseCode } from '../transport/transport.js';
import type { ServerTransport } from '../transport/transport.js';
import { WsTransport } from '../transport/ws-transport.js';

/** Why the heartbeat ended a connection. */
export type HeartbeatVerdict = 'missed-pong' | 'not-reading';

/** What the heartbeat watches: the gateway's sessions. */
export interface Watched {
  readonly transport: ServerTransport;
  close(code: number, reason: string): void;
}

/**
 * Pings every WebSocket on an interval and terminates those that did not answer the previous
 * ping (the `ws` sweep): a half-open TCP connection is found within two intervals. Only a pong
 * carrying the payload of our latest ping counts: the ping waits behind everything queued for
 * the peer, so a peer that does not read never sees it, and pongs it sends on its own prove
 * nothing. Each sweep uses one fresh random payload for every socket.
 *
 * It also closes a connection (WebSocket or TCP) whose queued output is above `stuckBytes`
 * (`maxBufferedBytes`) at two sweeps in a row when what was queued at the first has still not
 * been written at the second: a peer that has not read even that in a whole interval. TCP has
 * no ping frame, so this is how a TCP peer that stopped reading is found; stdio, the process's
 * one connection, is left alone.
 *
 * It keeps no list of its own: it sweeps the gateway's sessions; a transport's `alive` flag
 * (set by the matching pong) says who answered, and only connections above `stuckBytes` at the
 * last sweep are remembered (weakly).
 */
export class Heartbeat {
  private timer: ReturnType<typeof setInterval> | undefined;
  /**
   * Connections whose output was above `stuckBytes` at the last sweep, each with whether what
   * was queued then has been written since.
   */
  private readonly above = new WeakMap<ServerTransport, { written: boolean }>();

  constructor(
    intervalMs: number,
    private readonly watched: ReadonlyMap<unknown, Watched>,
    /** Output queued above this at two sweeps in a row, not going down: not reading. 0: never. */
    private readonly stuckBytes: number,
    /** Told of each connection the heartbeat ends (for the log). */
    private readonly onDead: (verdict: HeartbeatVerdict) => void,
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
    const payload = randomBytes(8);
    for (const entry of this.watched.values()) {
      const transport = entry.transport;
      if (this.stuck(transport)) {
        this.onDead('not-reading');
        if (transport instanceof WsTransport) transport.socket.terminate();
        else entry.close(CloseCode.PolicyViolation, 'not reading');
        continue;
      }
      // TCP and stdio have no ping frame (their clients send rpc.ping); HTTP exchanges are brief.
      if (!(transport instanceof WsTransport)) continue;
      if (!transport.alive) {
        this.onDead('missed-pong');
        transport.socket.terminate();
        continue;
      }
      transport.ping(payload);
    }
  }

  /**
   * Above `stuckBytes` now and at the last sweep, and what was queued at the last sweep is not
   * written yet: the peer has not read even that in a whole interval. (A reader that keeps up
   * may have as much queued at every sweep, while it keeps taking it.)
   */
  private stuck(transport: ServerTransport): boolean {
    if (this.stuckBytes <= 0 || transport.kind === 'stdio' || !transport.onWritten) return false;
    if (transport.bufferedAmount <= this.stuckBytes) {
      this.above.delete(transport);
      return false;
    }
    const last = this.above.get(transport);
    if (last && !last.written) return true;
    const mark = { written: false };
    this.above.set(transport, mark);
    transport.onWritten(() => (mark.written = true));
    return false;
  }
}

import { randomBytes } from 'node:crypto';
import { CloseCode } from '../transport/transport.js';
import type { ServerTransport } from '../transport/transport.js';
import { SseTransport } from '../transport/sse-transport.js';
import { WsTransport } from '../transport/ws-transport.js';

/** Why the heartbeat ended a connection. */
export type HeartbeatVerdict = 'missed-pong' | 'not-reading';

/** What the heartbeat watches: the gateway's sessions. */
export interface Watched {
  readonly transport: ServerTransport;
  close(code: number, reason: string): void;
}

/** An interval is cut into at most this many slices... */
const MAX_SLICES = 100;
/**
 * Visits in a row an event stream's client that asked for keepalives may go unheard before it is
 * given up: it is heard at least every half interval (SseSocket), so three is a margin of two.
 */
const SSE_UNHEARD_VISITS = 3;
/** ...each at least this long (so short intervals, as tests use, are one slice). */
const MIN_SLICE_MS = 100;
/**
 * The most connections visited in one event-loop turn: a slice holding more goes on in the next
 * turns (setImmediate), so that the sockets' I/O is served in between. A ping costs tens of µs
 * of CPU here (its write and its pong), so a turn holds the loop a few ms at most, however many
 * connections a slice has (1,000 at 100,000 connections).
 */
export const VISITS_PER_TURN = 100;

/**
 * Pings every WebSocket once per interval and terminates those that did not answer the
 * previous ping (the `ws` sweep): a half-open TCP connection is found within two intervals.
 * Only a pong carrying the payload of our latest ping counts: the ping waits behind everything
 * queued for the peer, so a peer that does not read never sees it, and pongs it sends on its
 * own prove nothing. Each round (an interval) uses one fresh random payload for every socket.
 *
 * The interval is cut into slices (up to 100, at least 100 ms long): each connection is given
 * one when it opens (in turn, so they stay even) and is visited in that slice of every round,
 * so going through 100,000 connections is a hundred short slices rather than one turn that
 * writes 100,000 pings while every other socket waits (seconds, on two cores), and each
 * connection's visits are exactly one interval apart, however many open and close meanwhile. A
 * slice itself is visited VISITS_PER_TURN connections per event-loop turn.
 *
 * It also closes a connection (WebSocket or TCP) whose queued output is above `stuckBytes`
 * (`maxBufferedBytes`) at two visits in a row when what was queued at the first has still not
 * been written at the second: a peer that has not read even that in a whole interval. What its
 * subscriptions hold back during replays (`heldOf`) counts as queued: a peer that does not read
 * stalls them, and they grow with its topics however little its socket holds. TCP has
 * no ping frame, so this is how a TCP peer that stopped reading is found; stdio, the process's
 * one connection, is left alone.
 *
 * Of each connection it keeps only its key in the gateway's session map, in its slice's list
 * (a key whose session has gone is dropped when its slice comes); a transport's `alive` flag
 * (set by the matching pong) says who answered, and only connections above `stuckBytes` at the
 * last visit are remembered (weakly).
 */
export class Heartbeat<K = string, W extends Watched = Watched> {
  private timer: ReturnType<typeof setInterval> | undefined;
  /** The keys of the sessions of each slice. */
  private readonly slices: K[][] = [];
  /** The slice the next session opened joins. */
  private joinAt = 0;
  /** The slice the next tick visits. */
  private at = 0;
  private payload: Buffer = Buffer.alloc(0);
  /**
   * Connections whose output was above `stuckBytes` at the last visit, each with whether what
   * was queued then has been written since.
   */
  private readonly above = new WeakMap<ServerTransport, { written: boolean }>();

  constructor(
    intervalMs: number,
    private readonly watched: ReadonlyMap<K, W>,
    /** Output queued above this at two visits in a row, not going down: not reading. 0: never. */
    private readonly stuckBytes: number,
    /** Told of each connection the heartbeat ends (for the log). */
    private readonly onDead: (verdict: HeartbeatVerdict) => void,
    /** Characters a connection's subscriptions hold back during replays, counted as queued. */
    private readonly heldOf: (entry: W) => number = () => 0,
  ) {
    if (intervalMs > 0) {
      const count = Math.max(1, Math.min(MAX_SLICES, Math.floor(intervalMs / MIN_SLICE_MS)));
      for (let i = 0; i < count; i++) this.slices.push([]);
      this.timer = setInterval(() => this.slice(), Math.round(intervalMs / count));
      this.timer.unref();
      for (const key of watched.keys()) this.watch(key);
    }
  }

  /** A session opened under `key` in the watched map: it is visited from its slice's next turn on. */
  watch(key: K): void {
    if (this.timer === undefined) return;
    this.slices[this.joinAt]!.push(key);
    this.joinAt = (this.joinAt + 1) % this.slices.length;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.slices.length = 0;
  }

  /** Visit the sessions of the next slice, dropping the keys of those that have gone. */
  private slice(): void {
    if (this.at === 0) this.payload = randomBytes(8);
    const keys = this.slices[this.at]!;
    this.at = (this.at + 1) % this.slices.length;
    this.visitFrom(keys, 0, 0, this.payload);
  }

  /**
   * Visit `keys` from `from` on, at most VISITS_PER_TURN of them, then go on in the next turn.
   * The keys still watched are moved down to the first `kept` places as it goes (keys a session
   * opened meanwhile adds at the end are visited too), and the rest cut off at the end.
   */
  private visitFrom(keys: K[], from: number, kept: number, payload: Buffer): void {
    if (this.timer === undefined) return; // stopped
    const end = Math.min(keys.length, from + VISITS_PER_TURN);
    for (let i = from; i < end; i++) {
      const key = keys[i]!;
      const entry = this.watched.get(key);
      if (!entry) continue;
      keys[kept++] = key;
      this.visit(entry, payload);
    }
    if (end < keys.length) {
      setImmediate(() => this.visitFrom(keys, end, kept, payload));
      return;
    }
    keys.length = kept;
  }

  private visit(entry: W, payload: Buffer): void {
    const transport = entry.transport;
    if (this.stuck(entry)) {
      this.onDead('not-reading');
      if (transport instanceof WsTransport) transport.socket.terminate();
      else entry.close(CloseCode.PolicyViolation, 'not reading');
      return;
    }
    // An event stream's client that said it would be heard from every interval (its keepalive):
    // given up after three visits in a row without a word, as a WebSocket that misses a pong.
    // Its TCP connection alone could hold it for a quarter of an hour past its going.
    if (transport instanceof SseTransport && transport.keepaliveMs > 0) {
      if (transport.heard) {
        transport.heard = false;
        transport.unheardVisits = 0;
      } else if (++transport.unheardVisits >= SSE_UNHEARD_VISITS) {
        this.onDead('missed-pong');
        entry.close(CloseCode.GoingAway, 'no word from the client');
      }
      return;
    }
    // TCP and stdio have no ping frame (their clients send rpc.ping); HTTP exchanges are brief.
    if (!(transport instanceof WsTransport)) return;
    // Reading paused for the input budget (the peer sent more than it may) holds the pong back
    // with the rest: not a dead peer. The output buffer's pause is not excused: the ping waits
    // behind that output, so a peer that has not read it in an interval has not answered.
    if (!transport.alive && !transport.pongMayBeUnread) {
      this.onDead('missed-pong');
      transport.socket.terminate();
      return;
    }
    transport.ping(payload);
  }

  /**
   * Above `stuckBytes` now and at the last visit, and what was queued at the last visit is not
   * written yet: the peer has not read even that in a whole interval. (A reader that keeps up
   * may have as much queued at every visit, while it keeps taking it.)
   */
  private stuck(entry: W): boolean {
    const transport = entry.transport;
    if (this.stuckBytes <= 0 || transport.kind === 'stdio' || !transport.onWritten) return false;
    if (transport.bufferedAmount + this.heldOf(entry) <= this.stuckBytes) {
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

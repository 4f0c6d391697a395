// Waking an idle Redis stream consumer when its stream is written, without reading an entry. A
// blocking XREADGROUP or XREAD would hand the entries over unchecked (any size, every field), so
// instead a connection of the consumer's own, duplicated from its configured one, has Redis track
// the stream's key (CLIENT TRACKING … BCAST PREFIX <stream>): every change to the key (an XADD,
// its deletion, a FLUSHALL) sends the key's name as an invalidation message, never the content.
// The messages come to the connection itself (REDIRECT to its own id, read as a RESP2 subscriber
// of `__redis__:invalidate`). The consumer then takes entries with stream-take.ts's script, which
// checks them inside Redis. A Redis that refuses tracking (before 6.0, an ACL without CLIENT
// TRACKING, a proxy that lacks it) leaves the consumer polling.
import type { Redis } from 'ioredis';
import type { Logger } from '../peer/logger.js';

const INVALIDATE_CHANNEL = '__redis__:invalidate';

export class StreamWake {
  private readonly key: Buffer;
  private readonly conn: Redis;
  /** Tracking is on and the invalidations are read: a wait lasts until the stream is written. */
  private armed = false;
  /** The stream may have been written since the last `clear`. */
  private signalled = true;
  private waiter: (() => void) | undefined;
  private closed = false;
  /** Redis refused tracking: the connection is let go, the consumer polls. */
  private refused = false;
  /**
   * Counts the connection's closes: an arming whose connection closed since it began is over,
   * and an error it meets is the cut's, not Redis refusing tracking.
   */
  private closes = 0;

  constructor(
    redis: Redis,
    private readonly stream: string,
    private readonly logger: Logger,
  ) {
    this.key = Buffer.from(stream);
    this.conn = redis.duplicate({
      connectionName: 'wsrpc-server-api-watch',
      // Invalidations arrive as pub/sub messages only under RESP2 (RESP3 push frames are dropped).
      protocol: 2,
      // Each (re)connection arms itself again, in order: tracking first, then SUBSCRIBE.
      autoResubscribe: false,
      enableOfflineQueue: false,
      // A command under way when the connection drops fails then, rather than going again on
      // the next connection: CLIENT ID would answer that connection's id to an arming of the
      // last one, and a TRACKING sent again would name a client that is gone or overlap the
      // next arming's own. Each connection arms itself anew from its 'ready'.
      maxRetriesPerRequest: 0,
      lazyConnect: true,
    });
    this.conn.on('error', (err: Error) =>
      logger.debug({ err, stream }, 'server API: Redis stream watch connection error'),
    );
    this.conn.on('ready', () => void this.arm());
    this.conn.on('close', () => {
      // Writes while it reconnects would go unseen: the consumer reads once and polls meanwhile.
      this.closes++;
      this.armed = false;
      this.signal();
    });
    this.conn.on('messageBuffer', (channel: Buffer, message: unknown) => {
      if (channel.toString() !== INVALIDATE_CHANNEL) return;
      // A list of keys (the prefix matches longer names too), or null when Redis was flushed.
      if (Array.isArray(message) && !message.some((name) => this.key.equals(name as Buffer))) {
        return;
      }
      this.signal();
    });
    this.conn.connect().catch(() => undefined);
  }

  /** Whether a wait ends when the stream is written (else the consumer polls). */
  get watching(): boolean {
    return this.armed;
  }

  /** Forget earlier writes: called before each read, which sees them. */
  clear(): void {
    this.signalled = false;
  }

  /**
   * Resolves once the stream was written since `clear` (at once if it was), once watching stops,
   * after `ms`, or on `close`.
   */
  wait(ms: number): Promise<void> {
    if (this.signalled || this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.waiter = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiter = done;
    });
  }

  /** End a wait under way as a write would: the consumer has something to read (see consume.ts). */
  poke(): void {
    this.signal();
  }

  /** Disconnect at once: a wait under way ends. */
  close(): void {
    this.closed = true;
    this.armed = false;
    this.conn.disconnect();
    this.waiter?.();
  }

  private signal(): void {
    this.signalled = true;
    this.waiter?.();
  }

  private async arm(): Promise<void> {
    if (this.closed || this.refused) return;
    const connection = this.closes;
    const cut = (): boolean => this.closes !== connection || this.closed;
    try {
      const id = (await this.conn.client('ID')) as number;
      if (cut()) return;
      await this.conn.client('TRACKING', 'ON', 'REDIRECT', id, 'BCAST', 'PREFIX', this.stream);
      if (cut()) return;
      await this.conn.subscribe(INVALIDATE_CHANNEL);
      if (cut()) return;
      this.armed = true;
      // Anything written before tracking began is found by the read this starts.
      this.signal();
    } catch (err) {
      // A connection error, or anything met once the connection was cut: the next 'ready' arms
      // again. Redis's own refusal, on the connection still open, stands.
      if ((err as Error).name !== 'ReplyError' || cut()) return;
      this.refused = true;
      this.conn.disconnect();
      this.logger.warn(
        { err, stream: this.stream },
        'server API: Redis refused CLIENT TRACKING on the stream; the consumer polls it instead',
      );
    }
  }
}

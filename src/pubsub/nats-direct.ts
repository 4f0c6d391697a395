/*
 * `$`-topics on NATS: messages addressed to a node or a user (see SessionRouter). They go over
 * core NATS subjects, with no stream and no history: a stream per node or user would pile up,
 * and the router retries what it needs to.
 *
 * The client sends its core subscriptions again when it reconnects, but a connection closed for
 * good (nats.js gives up when the server refuses the credentials twice in a row) takes them with
 * it: the broker makes a new connection, and `relink` subscribes every held topic on it, so the
 * topics subscribed on the live connection are always the ones held here.
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { BrokerMessage } from './broker.js';
import { bounded } from './nats-link.js';
import type { Link } from './nats-link.js';
import { natsDirectSubject } from './nats-names.js';

/** One held `$`-topic: who it delivers to, and its core subscription on one connection. */
interface DirectSubscription {
  readonly topic: string;
  readonly deliver: (message: BrokerMessage) => void;
  /** Messages delivered so far: their local numbering, kept across connections. */
  seq: number;
  /** The connection it is subscribed on; none when subscribing on the last one failed. */
  on?: { nc: NatsConnection; subscription: Subscription };
}

export class NatsDirectSubjects {
  /** Held `$`-topics by topic, in the order they were first subscribed. */
  private readonly direct = new Map<string, DirectSubscription>();
  private directSeq = 0;

  constructor(
    private readonly prefix: string,
    private readonly timeoutMs: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Sent without waiting; resolves to a local count, as addressed messages have no seq. */
  publish(link: Link, topic: string, payload: string): number {
    // Addressed messages need no history: a stream per node or user would pile up.
    link.nc.publish(natsDirectSubject(this.prefix, topic), payload);
    return ++this.directSeq;
  }

  async subscribe(
    link: Link,
    topic: string,
    deliver: (message: BrokerMessage) => void,
  ): Promise<void> {
    const what = `subscribe to "${topic}"`;
    const previous = this.direct.get(topic);
    if (previous) stopListening(previous);
    const held: DirectSubscription = { topic, deliver, seq: 0 };
    this.listen(held, link.nc);
    this.direct.set(topic, held);
    // Resolve once the server has the interest (a round trip on this connection): a message
    // published by another node after that reaches us.
    try {
      await bounded(what, this.timeoutMs, () => link.nc.flush());
    } catch (err) {
      // Refused: not held, whichever connection it was moved to meanwhile.
      if (this.direct.get(topic) === held) this.direct.delete(topic);
      stopListening(held);
      throw err;
    }
  }

  /** False when `topic` has no direct subscription here. */
  unsubscribe(topic: string): boolean {
    const held = this.direct.get(topic);
    if (!held) return false;
    this.direct.delete(topic);
    stopListening(held);
    return true;
  }

  /**
   * A new connection (the one before was closed for good): subscribe every held topic on it,
   * in the order they were subscribed. Synchronous, so a subscribe or unsubscribe made through
   * the new link finds every topic already on it; the caller's next round trip on it gives the
   * server all of them. Never throws: a topic that cannot be subscribed (the connection closed
   * already) is tried again on the next one.
   */
  relink(link: Link): void {
    for (const held of this.direct.values()) {
      if (held.on?.nc === link.nc) continue;
      stopListening(held);
      try {
        this.listen(held, link.nc);
      } catch (err) {
        this.onError(err);
      }
    }
  }

  /** Subscribe `held` on `nc` (throws when `nc` is closed). */
  private listen(held: DirectSubscription, nc: NatsConnection): void {
    const { topic } = held;
    const subscription = nc.subscribe(natsDirectSubject(this.prefix, topic), {
      callback: (err, msg) => {
        if (err) return this.onError(err);
        try {
          held.deliver({ topic, seq: ++held.seq, payload: msg.string() });
        } catch (error) {
          this.onError(error);
        }
      },
    });
    held.on = { nc, subscription };
  }
}

/** Unsubscribe `held` from its connection (a no-op on one closed already). */
function stopListening(held: DirectSubscription): void {
  held.on?.subscription.unsubscribe();
  held.on = undefined;
}

// Presence on this node: the members it owns (one per subscription to a topic declared with
// `presence`), written to the broker's store under a lease the node renews every third of
// `presenceLeaseMs`; the reaping of other nodes' lapsed leases; the join/leave changes sent to
// every node on the topic's `$presence.<topic>` channel and gathered there into one event per
// `presenceCoalesceMs`; `gateway.presence(topic)` and the clients' `$presence` subscription.
import { StreamContext } from './stream-context.js';
import { nanoid } from 'nanoid';
import { Observable, share } from 'rxjs';
import type { HandlerContext } from '../peer/handler-context.js';
import type { Logger } from '../peer/logger.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { InvalidParamsError, ServerError } from '../protocol/errors.js';
import type { Broker, BrokerMessage } from '../pubsub/broker.js';
import {
  MAX_PRESENCE_INFO_BYTES,
  PRESENCE_EVENTS_PREFIX,
  presencePageLimit,
  publicMember,
} from '../pubsub/presence.js';
import type { PresenceEntry, PresenceMember, PresenceStore } from '../pubsub/presence.js';
import { resolvePresence } from './presence-options.js';
import type { ResolvedPresence, TopicPresenceOptions } from './presence-options.js';
import { FirstPageReads } from './first-page-reads.js';
import { PresenceWindow } from './presence-window.js';
import type { PresenceEvent } from './presence-window.js';
import type { Session } from './session.js';
import type { KeptParams } from './topic-subscription.js';

/** The subscription name a client asks a topic's presence with: `["$presence", {"topic": t}]`. */
export const PRESENCE_SUBSCRIPTION = '$presence';

/**
 * The most JSON one presence announcement carries (its lists of joins and leaves): more goes in
 * several, each well under NATS's default max_payload (1 MiB).
 */
export const ANNOUNCE_BYTES = 256 * 1024;
/** An announcement's JSON around its entries: `{"j":[],"l":[]}`. */
const ANNOUNCE_ENVELOPE_BYTES = 15;

/** Members a page of `gateway.presence(topic).members()` holds unless asked otherwise. */
const DEFAULT_PAGE = 100;

/**
 * First pages of `$presence` subscriptions read from the store at once on the node (each a
 * count and a page of members; one per topic at a time, shared by its subscribers).
 */
export const MAX_PRESENCE_FIRST_PAGE_READS = 8;

/** What a `$presence` subscription is sent first. */
interface FirstPage {
  count: number;
  members: PresenceMember[];
  cursor?: string;
}

/** `gateway.presence(topic)`: the topic's members on every node. */
export interface PresenceHandle {
  /** Members of the topic, on every node. */
  count(): Promise<number>;
  /** A page of members (`limit` 1 to 1 000, default 100); `cursor` is where the next one starts. */
  members(page?: {
    cursor?: string;
    limit?: number;
  }): Promise<{ members: PresenceMember[]; cursor?: string }>;
  /** Joins and leaves on every node, at most one event per `presenceCoalesceMs`. */
  events$: Observable<PresenceEvent>;
}

/** What the presence service asks of the pub/sub service. */
export interface PresenceTopics<C> {
  /** The declared pattern `topic` falls under; undefined when none. */
  patternOf(topic: string): string | undefined;
  /** Whether `session` may subscribe to `topic` (claims, then the topic's authorize). */
  mayUse(session: Session<C>, topic: string, params: unknown, refresh?: boolean): Promise<boolean>;
  /**
   * What a subscription to `topic` keeps of its subscribe's `params` for a refresh's re-check:
   * their JSON text when the topic has `authorize`, else nothing (as a topic subscription keeps).
   */
  keptParams(topic: string, params: unknown): KeptParams;
  /** Whether a subscription to `topic` that kept `kept` may go on at a refresh (claims, authorize). */
  mayGoOn(session: Session<C>, topic: string, kept: KeptParams): Promise<boolean>;
  /** Refuse a name a subscribe to it would be refused for (-32602: too long, a lone surrogate). */
  checkName(topic: string): void;
  /**
   * Count `topic` and the params kept for it against the session's limits as a subscribe to it
   * counts (`maxTopicBytesPerConnection`, -32005; and, when `fresh`, the new-topic rate,
   * -32003); returns the release.
   */
  reserve(session: Session<C>, topic: string, fresh: boolean, kept: KeptParams): () => void;
}

export interface PresenceSettings {
  leaseMs: number;
  coalesceMs: number;
}

interface Pending {
  joined: Map<string, PresenceEntry>;
  left: Map<string, PresenceEntry>;
}

/**
 * One subscription's membership: its entry as last written. A membership written under an owner
 * that lapsed is written again under a new key (rekey), so `entry` changes then.
 */
interface Membership {
  entry: PresenceEntry;
}

/** The changes as they travel on `$presence.<topic>`: `{"j": [...], "l": [...]}`. */
interface Changes {
  j?: PresenceEntry[];
  l?: PresenceEntry[];
}

export class PresenceService<C> {
  private readonly declared = new Map<string, ResolvedPresence<C>>();
  /** The members this node owns, by topic (written again under a new owner if its lease lapsed). */
  private readonly local = new Map<string, Set<Membership>>();
  /** Changes not written yet, by topic; at most one write per topic is under way. */
  private readonly pending = new Map<string, Pending>();
  /** Memberships made on this node: the last one's number (each member's key holds its own). */
  private memberships = 0;
  private readonly writing = new Set<string>();
  /** The writes under way (at most one per topic). */
  private readonly flushes = new Set<Promise<void>>();
  private readonly watches = new Map<string, Observable<PresenceEvent>>();
  /**
   * Topics whose `$presence` channel the node is subscribed to on the broker (a watcher is on),
   * with how many of its watches listen (a handle's `events$` may outlive its map entry).
   */
  private readonly listening = new Map<string, number>();
  /** Per watched topic: settles once the broker's subscribe to its joins and leaves has. */
  private readonly listened = new Map<string, Promise<void>>();
  /**
   * `$presence` subscriptions accepted for a topic whose channel is not listened to yet, by topic:
   * each counts toward limits.maxTopics from its acceptance until its watch starts or it ends, so
   * that subscribes arriving together cannot all pass the limit before any of them listens.
   */
  private readonly reserved = new Map<string, number>();

  /** Topics whose presence this node watches or is about to: a broker channel each. */
  get watchedTopics(): number {
    let count = this.listening.size;
    for (const topic of this.reserved.keys()) if (!this.listening.has(topic)) count++;
    return count;
  }

  /** Count one `$presence` subscription of `topic` until the returned function is called. */
  private reserveWatch(topic: string): () => void {
    this.reserved.set(topic, (this.reserved.get(topic) ?? 0) + 1);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      const left = this.reserved.get(topic)! - 1;
      if (left === 0) this.reserved.delete(topic);
      else this.reserved.set(topic, left);
    };
  }
  private readonly firstPages = new FirstPageReads<FirstPage>(
    MAX_PRESENCE_FIRST_PAGE_READS,
    async (topic) => {
      const maxListed = this.presenceOf(topic)?.maxListed ?? 1;
      const [count, page] = await Promise.all([
        this.store.count(topic),
        this.store.members(topic, undefined, maxListed),
      ]);
      return {
        count,
        members: page.members.map(publicMember),
        ...(page.cursor !== undefined ? { cursor: page.cursor } : {}),
      };
    },
  );
  /** This node's lease id in the store: new when its lease was found lapsed. */
  private owner: string;
  /**
   * The owner a write has settled under, succeeded or failed (a failed one may have made the
   * lease all the same: a lost reply): the lease renewed is this one's, and only once it is the
   * current owner's. Renewing an owner whose first write is still on its way would find no lease
   * and take it for a lapse; never renewing one whose write made a lease would let it lapse.
   */
  private settledOwner: string | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  /** The tick under way, one at a time; a close waits for it (its writes would land after the release). */
  private ticking: Promise<void> | undefined;
  /** Owners of this node's that lapsed and are still to be released (tick). */
  private readonly releaseDue: string[] = [];
  private closed = false;

  constructor(
    private readonly broker: Broker,
    private readonly nodeId: string,
    private readonly logger: Logger,
    private readonly settings: PresenceSettings,
    private readonly topics: PresenceTopics<C>,
  ) {
    this.owner = this.newOwner();
  }

  /** The broker's store; declaring a presence topic needs one. */
  private get store(): PresenceStore {
    const store = this.broker.presence;
    if (!store) throw new Error('This broker keeps no presence (Broker.presence)');
    return store;
  }

  /** A topic declaration's `presence` option, checked (undefined: off); throws when it cannot be. */
  check(
    pattern: string,
    value: boolean | TopicPresenceOptions<C> | undefined,
  ): ResolvedPresence<C> | undefined {
    const presence = resolvePresence(pattern, value);
    if (presence && !this.broker.presence) {
      throw new TypeError(
        `topic "${pattern}": presence needs a broker that keeps it (MemoryBroker, RedisBroker, NatsBroker)`,
      );
    }
    return presence;
  }

  /** Keep a declared topic's presence (checked by `check`); starts the lease on the first. */
  declare(pattern: string, presence: ResolvedPresence<C>): void {
    this.declared.set(pattern, presence);
    if (!this.timer) {
      // Every node reaps lapsed leases, so one that holds no member still takes part.
      this.timer = setInterval(() => void this.tick(), Math.max(1, this.settings.leaseMs / 3));
      this.timer.unref?.();
    }
  }

  /** The presence settings of `topic`; undefined when its declaration has none. */
  presenceOf(topic: string): ResolvedPresence<C> | undefined {
    if (this.declared.size === 0 || topic.startsWith('$')) return undefined;
    const pattern = this.topics.patternOf(topic);
    return pattern === undefined ? undefined : this.declared.get(pattern);
  }

  /**
   * A subscription of `session` to `topic` started: on a presence topic it becomes a member,
   * and the function returned removes it (when the subscription ends).
   */
  subscribed(session: Session<C>, topic: string): (() => void) | undefined {
    const presence = this.presenceOf(topic);
    if (!presence || this.closed) return undefined;
    const entry: PresenceEntry = { key: this.newKey(session.id), sessionId: session.id };
    if (session.user !== undefined) entry.user = session.user;
    const info = this.infoOf(presence, session, topic);
    if (info) entry.info = info;
    const membership: Membership = { entry };
    let members = this.local.get(topic);
    if (!members) this.local.set(topic, (members = new Set<Membership>()));
    members.add(membership);
    this.queue(topic, entry, 'joined');
    return () => {
      const held = this.local.get(topic);
      if (!held?.delete(membership)) return;
      if (held.size === 0) this.local.delete(topic);
      this.queue(topic, membership.entry, 'left');
    };
  }

  /** `gateway.presence(topic)`. */
  handle(topic: string): PresenceHandle {
    if (!this.presenceOf(topic)) {
      throw new TypeError(
        `Topic "${topic}" has no presence: declare it with gateway.topic(pattern, { presence: true })`,
      );
    }
    return {
      count: () => this.store.count(topic),
      members: async ({ cursor, limit } = {}) => {
        const page = await this.store.members(
          topic,
          cursor,
          presencePageLimit(limit, DEFAULT_PAGE),
        );
        return {
          members: page.members.map(publicMember),
          ...(page.cursor !== undefined ? { cursor: page.cursor } : {}),
        };
      },
      events$: this.events(topic),
    };
  }

  /**
   * The `$presence` subscription: `{ "topic": t }` (or `[t]`), checked, authorized and counted
   * like subscribing to the topic; first `{ count, members, cursor? }` (the first `maxListed`
   * members), then each coalesced event. `ctx` is the stream's: its signal aborts when the
   * subscription ends or is refused after this, which gives back what it counted.
   */
  async subscription(
    params: unknown,
    ctx: HandlerContext<Session<C>>,
  ): Promise<Observable<unknown>> {
    const topic = presenceTopicParam(params);
    // The name is kept while the subscription lives, here and on the broker's channel.
    this.topics.checkName(topic);
    const presence = this.presenceOf(topic);
    if (!presence) {
      throw new InvalidParamsError(
        this.topics.patternOf(topic) === undefined ? 'Unknown topic' : 'This topic has no presence',
        { topic },
      );
    }
    const session = ctx.session;
    if (!(await this.topics.mayUse(session, topic, params))) {
      throw new ServerError(ErrorCode.Unauthorized, 'Not authorized for this topic', { topic });
    }
    // A refresh weighs it again, as the topic's own subscriptions are, with what it keeps of the
    // params: their text, counted with the name, only for a topic with `authorize`. Not `params`
    // itself, which a client could make a MiB each, held for the stream's life and counted nowhere.
    const kept = this.topics.keptParams(topic, params);
    const mayGoOn = () => this.topics.mayGoOn(session, topic, kept);
    StreamContext.markStandsFor(ctx, { topic, mayGoOn });
    const signal = ctx.signal;
    if (signal.aborted) throw new ServerError(ErrorCode.RequestCancelled, 'Request cancelled');
    // A topic whose presence this node does not watch yet costs a broker channel.
    const fresh = !this.listening.has(topic) && !this.reserved.has(topic);
    const release = this.topics.reserve(ctx.session, topic, fresh, kept);
    const unreserve = this.reserveWatch(topic);
    signal.addEventListener(
      'abort',
      () => {
        release();
        unreserve();
      },
      { once: true },
    );
    return new Observable<unknown>((subscriber) => {
      // Events come in while the first page is read: held, then sent after it.
      let held: PresenceEvent[] | undefined = [];
      // Watched from here, not before: a subscribe refused after this leaves no watch behind.
      const watching = this.events(topic).subscribe({
        next: (event) => (held ? held.push(event) : subscriber.next(event)),
        error: (err: unknown) => subscriber.error(err),
      });
      // Listened to from here (or refused, and ended): counted as listening, no more as reserved.
      unreserve();
      // Read once the node listens for the topic's joins and leaves (its broker subscribe takes
      // a round trip): a page read before would miss a member who joined meanwhile, in neither
      // the page nor an event. Shared with the topic's other subscribers, bounded on the node;
      // not read at all when the subscription ends before its read starts.
      let leave: (() => void) | undefined;
      let ended = false;
      void (this.listened.get(topic) ?? Promise.resolve()).then(() => {
        if (ended) return;
        leave = this.firstPages.want(topic, {
          done: (page) => {
            subscriber.next(page);
            for (const event of held ?? []) subscriber.next(event);
            held = undefined;
          },
          fail: (err: unknown) => subscriber.error(err),
        });
      });
      return () => {
        ended = true;
        leave?.();
        watching.unsubscribe();
      };
    });
  }

  /**
   * Stop renewing, remove this node's members from the store and tell every node they left (a
   * gateway closing). A drain closes its sessions first: their leaves wait in `pending`
   * behind the write under way, and the release removes them from the store with the rest, so
   * they are announced with the rest too.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    // A tick under way (a renewal, a lapsed owner's release, a reap) ends first.
    await this.ticking;
    // Nothing written, being written or waiting to be: no member of this node anywhere.
    const written =
      this.settledOwner !== undefined || this.flushes.size > 0 || this.pending.size > 0;
    if (!written || !this.broker.presence) return;
    // Every member any node may have been told of: those still here, and those whose leave is
    // not written yet. One whose join is not written yet goes too (the writes under way are
    // settled below, after this list is taken): a leave of a member a watcher never heard of
    // changes nothing in its list.
    const leaving = new Map<string, Map<string, PresenceEntry>>();
    const gone = (topic: string, entries: Iterable<PresenceEntry>): void => {
      let members = leaving.get(topic);
      if (!members) leaving.set(topic, (members = new Map<string, PresenceEntry>()));
      for (const entry of entries) members.set(entry.key, entry);
    };
    const takePending = (): void => {
      for (const [topic, pending] of this.pending) gone(topic, pending.left.values());
      this.pending.clear();
    };
    for (const [topic, members] of this.local) {
      gone(
        topic,
        [...members].map((membership) => membership.entry),
      );
    }
    this.local.clear();
    takePending();
    // A write under way would land after the release, under an owner that no longer exists:
    // it ends first (nothing is pending, so each stops after its current write, and announces
    // it ahead of the leaves below).
    await Promise.allSettled([...this.flushes]);
    // A write that failed meanwhile put its changes back: its leaves were not announced either.
    takePending();
    try {
      // The lapsed owners not released yet too: their members would wait for a reaper.
      for (const owner of [...this.releaseDue, this.owner]) await this.store.release(owner);
      this.releaseDue.length = 0;
      for (const [topic, members] of leaving) await this.announce(topic, [], [...members.values()]);
    } catch (err) {
      this.logger.warn(
        { err },
        'presence: could not remove this node’s members; they lapse with its lease',
      );
    }
  }

  /** The topic's coalesced events, one broker subscription per node shared by every watcher. */
  private events(topic: string): Observable<PresenceEvent> {
    const current = this.watches.get(topic);
    if (current) return current;
    const maxListed = this.presenceOf(topic)?.maxListed ?? 1;
    const channel = PRESENCE_EVENTS_PREFIX + topic;
    const watch: Observable<PresenceEvent> = new Observable<PresenceEvent>((subscriber) => {
      // One watch a topic is listened to through at a time (the broker keeps one handler a
      // channel): one subscribed again after its last observer left (a handle the application
      // kept) joins the watch there is now, rather than take the channel from it and end it
      // for all when done. Held in `watches` only while watched: a handle made and never
      // watched holds nothing.
      const live = this.watches.get(topic);
      if (live && live !== watch) return live.subscribe(subscriber);
      this.watches.set(topic, watch);
      const window = new PresenceWindow(maxListed);
      let due: ReturnType<typeof setTimeout> | undefined;
      const emit = async (): Promise<void> => {
        let count: number;
        try {
          count = await this.store.count(topic);
        } catch (err) {
          this.logger.warn({ err, topic }, 'presence: could not count the members');
          // Unwatched while the count was read: no retry (teardown already cleared `due`).
          if (subscriber.closed) return;
          due = setTimeout(() => void emit(), this.settings.coalesceMs);
          return;
        }
        due = undefined;
        if (!subscriber.closed) subscriber.next(window.take(count));
      };
      const deliver = (message: BrokerMessage): void => {
        const changes = readChanges(message.payload);
        if (!changes) return;
        window.add(changes.j ?? [], changes.l ?? []);
        due ??= setTimeout(() => void emit(), this.settings.coalesceMs);
      };
      this.listening.set(topic, (this.listening.get(topic) ?? 0) + 1);
      // Settles either way: a refusal ends the watch (and the subscriptions on it) first.
      const listened = this.broker.subscribe(channel, deliver).then(
        () => undefined,
        (err: unknown) => {
          this.logger.warn({ err, topic }, 'presence: could not listen for joins and leaves');
          subscriber.error(err);
        },
      );
      this.listened.set(topic, listened);
      return () => {
        clearTimeout(due);
        if (this.watches.get(topic) === watch) this.watches.delete(topic);
        if (this.listened.get(topic) === listened) this.listened.delete(topic);
        const listeners = this.listening.get(topic)! - 1;
        if (listeners === 0) this.listening.delete(topic);
        else this.listening.set(topic, listeners);
        this.broker.unsubscribe(channel).catch((err: unknown) => {
          this.logger.warn({ err, topic }, 'presence: broker unsubscribe failed');
        });
      };
    }).pipe(share());
    return watch;
  }

  private infoOf(
    presence: ResolvedPresence<C>,
    session: Session<C>,
    topic: string,
  ): Record<string, unknown> | undefined {
    if (!presence.info) return undefined;
    try {
      const info = presence.info(session);
      const bytes = Buffer.byteLength(JSON.stringify(info) ?? '', 'utf8');
      if (bytes <= MAX_PRESENCE_INFO_BYTES) return info;
      session.logger.warn(
        { topic, bytes, limit: MAX_PRESENCE_INFO_BYTES },
        'presence info left out: larger than 1 KiB of JSON',
      );
    } catch (err) {
      session.logger.warn({ err, topic }, 'presence info hook failed: left out');
    }
    return undefined;
  }

  /** The topic's changes not written yet, made empty when it has none. */
  private pendingOf(topic: string): Pending {
    let pending = this.pending.get(topic);
    if (!pending) this.pending.set(topic, (pending = { joined: new Map(), left: new Map() }));
    return pending;
  }

  private queue(topic: string, entry: PresenceEntry, change: 'joined' | 'left'): void {
    const pending = this.pendingOf(topic);
    if (change === 'joined') pending.joined.set(entry.key, entry);
    // A member that leaves before its join was written was never there.
    else if (!pending.joined.delete(entry.key)) pending.left.set(entry.key, entry);
    if (!this.writing.has(topic)) this.startFlush(topic);
  }

  /**
   * Write the topic's pending changes, one write at a time: changes made meanwhile wait and go
   * in the next, so a burst of joins costs a few writes, not one each. A failed write is kept
   * and tried again on the next lease tick.
   */
  /** Start writing the topic's pending changes; `close` waits for the writes under way. */
  private startFlush(topic: string): void {
    const flush = this.flush(topic).finally(() => this.flushes.delete(flush));
    this.flushes.add(flush);
  }

  private async flush(topic: string): Promise<void> {
    this.writing.add(topic);
    try {
      for (;;) {
        const pending = this.pending.get(topic);
        if (!pending || (pending.joined.size === 0 && pending.left.size === 0)) return;
        this.pending.delete(topic);
        const joined = [...pending.joined.values()];
        const left = [...pending.left.values()];
        const owner = this.owner;
        try {
          await this.store.write(
            topic,
            owner,
            joined,
            left.map((entry) => entry.key),
            this.settings.leaseMs,
          );
        } catch (err) {
          this.settledOwner = owner;
          this.requeue(topic, pending);
          this.logger.warn({ err, topic }, 'presence: write failed; tried again with the lease');
          return;
        }
        this.settledOwner = owner;
        await this.announce(topic, joined, left);
      }
    } finally {
      this.writing.delete(topic);
    }
  }

  /** Put a failed write's changes back before the ones made since. */
  private requeue(topic: string, failed: Pending): void {
    const since = this.pending.get(topic);
    this.pending.set(topic, failed);
    if (!since) return;
    for (const entry of since.joined.values()) failed.joined.set(entry.key, entry);
    for (const entry of since.left.values()) {
      if (!failed.joined.delete(entry.key)) failed.left.set(entry.key, entry);
    }
  }

  /**
   * Tell every node of `joined` and `left`, in messages of at most ANNOUNCE_BYTES of JSON each
   * (a node's whole membership of a topic, written again after a lapse or removed on close,
   * would pass a broker's message bound, NATS's max_payload of 1 MiB by default), in order.
   */
  private async announce(
    topic: string,
    joined: readonly PresenceEntry[],
    left: readonly PresenceEntry[],
  ): Promise<void> {
    if (joined.length === 0 && left.length === 0) return;
    const messages: Changes[] = [];
    let changes: Changes = {};
    let bytes = ANNOUNCE_ENVELOPE_BYTES;
    const add = (list: 'j' | 'l', entry: PresenceEntry): void => {
      // UTF-8 bytes, as a broker bounds a message: an `info` not in ASCII takes up to three
      // bytes a character.
      const size = Buffer.byteLength(JSON.stringify(entry), 'utf8') + 1;
      if (bytes > ANNOUNCE_ENVELOPE_BYTES && bytes + size > ANNOUNCE_BYTES) {
        messages.push(changes);
        changes = {};
        bytes = ANNOUNCE_ENVELOPE_BYTES;
      }
      (changes[list] ??= []).push(entry);
      bytes += size;
    };
    for (const entry of joined) add('j', entry);
    for (const entry of left) add('l', entry);
    messages.push(changes);
    try {
      for (const message of messages) {
        await this.broker.publish(PRESENCE_EVENTS_PREFIX + topic, JSON.stringify(message));
      }
    } catch (err) {
      // The store holds the truth; watchers miss this event's lists, not the count.
      this.logger.warn({ err, topic }, 'presence: could not announce joins and leaves');
    }
  }

  /** Renew the lease (or write everything again under a new one), retry failed writes, reap. */
  private tick(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.ticking ??= this.runTick().finally(() => (this.ticking = undefined));
    return this.ticking;
  }

  private async runTick(): Promise<void> {
    try {
      const store = this.store;
      if (
        this.settledOwner === this.owner &&
        !(await store.renew(this.owner, this.settings.leaseMs))
      ) {
        // Lapsed (a long pause, a broker outage): other nodes removed, or are removing, our
        // members. Writes from now on go under a new owner; those under way under the old one
        // are let finish (a write racing the release would leave members under an owner nobody
        // reaps), then every member is written anew and what the old owner still holds goes.
        const old = this.owner;
        this.owner = this.newOwner();
        await Promise.allSettled([...this.flushes]);
        this.releaseDue.push(old);
        this.rekeyWritten();
        this.logger.warn('presence: this node’s lease had lapsed; its members are written again');
      }
      // Until done: a release that fails (the outage is often still on) is tried again at the
      // next tick, as a write is below, or members would stay out of the store until each leaves.
      while (this.releaseDue.length > 0) {
        await store.release(this.releaseDue[0]!);
        this.releaseDue.shift();
      }
      for (const topic of this.pending.keys()) if (!this.writing.has(topic)) this.startFlush(topic);
      for (const { topic, members } of await store.reap()) await this.announce(topic, [], members);
    } catch (err) {
      this.logger.warn({ err }, 'presence: lease renewal or reaping failed');
    }
  }

  /**
   * After a lapse: every membership gets a new key, written (joined) and announced in its
   * topic's next write, all of the topic's in one. Its leave and join cannot then cancel out at
   * a watcher: the node that reaped the lapsed owner announces the old keys' leaves, which can
   * reach a watcher before or after this node's joins; under the old keys a late leave would
   * take from the watcher's list a member that is there. The old key is announced as left when
   * its join was written (a watcher may list it); a join still waiting to be written is dropped
   * instead, even one whose failed write may have landed all the same (a lost reply): it was
   * never announced, and the store loses it with the owner it went under, released or reaped.
   * So a membership leaves at most one old key waiting, however many lapses come before a write
   * goes through.
   */
  private rekeyWritten(): void {
    for (const [topic, members] of this.local) {
      const pending = this.pendingOf(topic);
      for (const membership of members) {
        const old = membership.entry;
        if (!pending.joined.delete(old.key)) pending.left.set(old.key, old);
        membership.entry = { ...old, key: this.newKey(old.sessionId) };
        pending.joined.set(membership.entry.key, membership.entry);
      }
      if (!this.writing.has(topic)) this.startFlush(topic);
    }
  }

  /**
   * A membership's key (`<session id>/<n>`, `n` new on this node each time): by membership, not
   * by subscription id, because a session unsubscribed from the topic's shared id gets it again
   * at its next subscribe, and that join and the earlier leave, written together, would name one
   * key (each store applies them in its own order).
   */
  private newKey(sessionId: string): string {
    return `${sessionId}/${(++this.memberships).toString(36)}`;
  }

  private newOwner(): string {
    return `${this.nodeId}.${nanoid(6)}`;
  }
}

/** The topic of a `$presence` subscribe: `{ "topic": t }` or `[t]`. */
function presenceTopicParam(params: unknown): string {
  const topic = Array.isArray(params)
    ? (params[0] as unknown)
    : params !== null && typeof params === 'object'
      ? (params as { topic?: unknown }).topic
      : undefined;
  if (typeof topic !== 'string' || topic === '') {
    throw new InvalidParamsError('$presence takes { "topic": name }', { field: 'topic' });
  }
  return topic;
}

function readChanges(payload: string): Changes | undefined {
  try {
    const value = JSON.parse(payload) as unknown;
    if (value === null || typeof value !== 'object') return undefined;
    const changes = value as Changes;
    if (changes.j !== undefined && !Array.isArray(changes.j)) return undefined;
    if (changes.l !== undefined && !Array.isArray(changes.l)) return undefined;
    return changes;
  } catch {
    return undefined;
  }
}

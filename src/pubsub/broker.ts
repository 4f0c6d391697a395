import type { Denial } from './deny-list.js';
import type { PresenceStore } from './presence.js';
import type { SessionDenial } from './session-deny-list.js';

export type { Denial } from './deny-list.js';
export type { SessionDenial } from './session-deny-list.js';

/** One published message as a broker hands it back: JSON text plus its per-topic sequence number. */
export interface BrokerMessage {
  topic: string;
  /**
   * 1, 2, 3, ... per topic, without holes, assigned by the broker: the same on every
   * node that sees the message (a client may resume on any node with it).
   */
  seq: number;
  /** The payload, already serialized as JSON text (serialized once, at publish). */
  payload: string;
  /**
   * The numbering `seq` belongs to (see {@link History.epoch}); undefined when the broker
   * cannot tell. A message with another epoch than the previous one starts a new numbering.
   */
  epoch?: string;
  /**
   * Session ids the message is not for (a publish `except` them): every node skips their
   * subscriptions when fanning it out. Carried with the live message only, never by history.
   */
  except?: readonly string[];
}

/** Session ids one publish may leave out (`except`) at most. */
export const MAX_EXCEPT = 64;

/**
 * `except` as a publish takes it (one id or a list): a list of at most MAX_EXCEPT session ids,
 * undefined when empty. Throws a RangeError (too many) or TypeError (not strings).
 */
export function exceptList(
  except: string | readonly string[] | undefined,
): readonly string[] | undefined {
  if (except === undefined) return undefined;
  const list = typeof except === 'string' ? [except] : except;
  if (!Array.isArray(list)) throw new TypeError('except: a session id or a list of them');
  if (list.length > MAX_EXCEPT) {
    throw new RangeError(`except: ${list.length} session ids, at most ${MAX_EXCEPT}`);
  }
  for (const id of list) {
    if (typeof id !== 'string') throw new TypeError('except: session ids are strings');
  }
  return list.length === 0 ? undefined : list;
}

/**
 * What a broker reports (its onError) for a message whose except list is there but is not a list
 * of session ids (never one this gateway writes): delivered to every subscriber rather than lost,
 * and said.
 */
export function malformedExcept(topic: string, seq: number): Error {
  return new Error(
    `topic ${topic}, message ${seq}: its except list is not a list of session ids; delivered to every subscriber`,
  );
}

/**
 * The left-out session ids as a broker carries them (a JSON list of strings, stored by the
 * Redis publish script or sent in a NATS header); undefined for anything else.
 */
export function parseExcept(text: string): readonly string[] | undefined {
  try {
    const list: unknown = JSON.parse(text);
    return Array.isArray(list) && list.every((id) => typeof id === 'string')
      ? (list as string[])
      : undefined;
  } catch {
    return undefined;
  }
}

/** How much of a topic the broker keeps for clients that resume. */
export interface Retention {
  /** Most recent messages kept per topic. Default 1 000. */
  maxLength: number;
  /** Messages older than this are dropped from history. Default 600 000 ms (10 minutes). */
  maxAgeMs: number;
}

export const defaultRetention: Retention = { maxLength: 1_000, maxAgeMs: 600_000 };

/**
 * A publish refused because it would create a topic on the broker (a NATS stream, the Redis
 * keys of a topic) beyond the node's budget of new topics per second. Nothing was published;
 * worth retrying later.
 */
export class TopicCreationLimitError extends Error {
  override readonly name = 'TopicCreationLimitError';
  constructor(
    readonly topic: string,
    readonly perSecond: number,
  ) {
    super(
      `Too many new topics: this node creates at most ${perSecond} topics per second on the broker`,
    );
  }
}

/**
 * A publish the broker may have stored although it did not say so: it was sent, and its answer
 * was lost (the connection dropped under it, or no answer came in time). If it was stored, it
 * has a seq and subscribers get it like any other message; a retry may then store it twice
 * (`publishOnce` with the same key lands once).
 */
export class PublishUnconfirmedError extends Error {
  override readonly name = 'PublishUnconfirmedError';
}

/** A history page size: a positive integer, or undefined (everything) for anything else. */
export function pageLimit(limit: number | undefined): number | undefined {
  return limit !== undefined && Number.isFinite(limit) && limit >= 1
    ? Math.floor(limit)
    : undefined;
}

/** What an idempotent publish (Broker.publishOnce) did. */
export interface OnceResult {
  /** The message's seq: the first publish's when this one was a duplicate. */
  seq: number;
  /** The key was seen within its window: nothing was published this time. */
  duplicate: boolean;
}

/** The longest window an idempotency key is remembered for (one day). */
export const MAX_IDEMPOTENCY_WINDOW_MS = 86_400_000;

/** What history still holds after a sequence number. */
export interface History {
  /** Messages with seq greater than the one asked for, oldest first, all still retained. */
  messages: BrokerMessage[];
  /** The topic's latest sequence number (0 when nothing was ever published). */
  lastSeq: number;
  /**
   * Names the topic's numbering: it changes when the broker loses the topic and numbers it
   * from 1 again (a Redis restarted without persistence, a new in-memory broker, a NATS stream
   * recreated), so a sequence number from another epoch means nothing here. Undefined when
   * the broker cannot tell (or the topic does not exist yet).
   */
  epoch?: string;
}

/**
 * Where topics live. The gateway subscribes a topic on the broker while it
 * has at least one local subscriber, and publishes through it, so every node
 * sharing a broker shares one topic space. The in-memory broker is the
 * embedded default; Redis and NATS brokers share one across nodes.
 */
export interface Broker {
  /**
   * True when every payload it delivers was published through a gateway in this process (the
   * memory broker): a payload is then not checked again on its way to subscribers. A broker
   * other processes write to (Redis, NATS) leaves it unset, and each message it delivers is
   * checked once per node (isSendablePayload) before it goes into a frame.
   */
  readonly trustedPayloads?: boolean;
  /**
   * Publish JSON text; resolves with the message's sequence number once the broker has
   * stored it (and trimmed the topic's history to `retention`). Rejects, never drops
   * silently, when the broker is unavailable: with PublishUnconfirmedError when the message was
   * sent and its answer lost (it may be stored). With `except` (at most MAX_EXCEPT session ids,
   * see exceptList), the message carries them to every node (BrokerMessage.except).
   */
  publish(
    topic: string,
    payload: string,
    retention?: Retention,
    except?: readonly string[],
  ): Promise<number>;
  /**
   * Deliver the topic's messages, in sequence order, each exactly once, until
   * `unsubscribe`. After an outage the broker delivers what it missed from history.
   * Subscribing creates nothing on the broker that outlives the subscription: a topic nobody
   * has published to gets its stream or keys at its first publish, not before.
   */
  subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void>;
  unsubscribe(topic: string): Promise<void>;
  /**
   * The retained messages after `afterSeq`, and the topic's latest sequence number. With
   * `limit`, at most that many messages (the oldest ones after `afterSeq`): a page, so that a
   * long history is read a part at a time (the next page starts after the last seq of this
   * one). Reading never creates anything on the broker for a topic it does not have.
   */
  history(topic: string, afterSeq: number, limit?: number): Promise<History>;
  /**
   * Publish like `publish`, once per `key` and topic within `windowMs` (at most
   * MAX_IDEMPOTENCY_WINDOW_MS): a publish retried with the same key within the window stores
   * nothing and resolves with the first one's seq and `duplicate: true`. Each broker bounds the
   * keys it remembers (see docs/security-and-limits.md). Optional: a broker without it cannot
   * take idempotency keys.
   */
  publishOnce?(
    topic: string,
    payload: string,
    key: string,
    windowMs: number,
    retention?: Retention,
  ): Promise<OnceResult>;
  /** True while the broker can take publishes (readiness follows it). */
  readonly ready: boolean;
  /**
   * Call `listener` each time the link to the broker is up again after it was down, once this
   * node's subscriptions are back in place: `$`-topic messages (no history, no catch-up) sent
   * meanwhile never arrive, so what they said is read again (the deny list, see
   * docs/identity.md). Returns a function that stops the calls. Optional: a broker without it
   * is never down, or is not read again.
   */
  onRelinked?(listener: () => void): () => void;
  close(): Promise<void>;
  /**
   * Put `user` on the deny list for `forMs` (gateway.revokeUser), with the revocation's time
   * (`revokedAt`, ms since the epoch): every node sharing the broker then refuses to
   * authenticate the user, unless its credentials were issued after `revokedAt`. A user
   * already listed keeps the newer revocation time and the later end. Rejects when the broker
   * is unavailable, or its list is full (`DenyListFullError`). Optional: a broker
   * without it cannot revoke users (revokeUser says so).
   */
  deny?(user: string, revokedAt: number, forMs: number): Promise<void>;
  /**
   * The user's entry on the deny list while it holds; undefined when the user is not listed
   * (or the entry lapsed). Rejects when the broker cannot tell (unavailable): the gateway then
   * refuses to authenticate the user (it fails closed).
   */
  denied?(user: string): Promise<Denial | undefined>;
  /**
   * Keep a record that `session` of `node` was revoked (gateway.revokeSession of a session on
   * another node), for `forMs`, with the revocation's time and `reason` (kept cut to 123 bytes):
   * `node` reads it when its link is back (deniedSessions), as the message to its topic is lost
   * while its link is down. A session already recorded keeps the newer revocation and the later
   * end. Rejects when the broker is unavailable, or its records are at their bound
   * (`SessionDenyListFullError`). Optional, with `deniedSessions`: without them a revoked
   * session of a node cut off from the broker stays open.
   */
  denySession?(
    node: string,
    session: string,
    revokedAt: number,
    forMs: number,
    reason: string,
  ): Promise<void>;
  /**
   * The revoked sessions of `node` whose records have not lapsed, in one read. Rejects when the
   * broker is unavailable.
   */
  deniedSessions?(node: string): Promise<SessionDenial[]>;
  /**
   * Where the topics' members are kept (topics declared with `presence`), shared by every node
   * on the broker. Optional: a broker without it cannot declare presence topics.
   */
  readonly presence?: PresenceStore;
}

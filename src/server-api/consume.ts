// The broker-consumed form of the server API: each entry of a Redis stream (read through a
// consumer group, so one node takes each) or each message on a NATS subject (a queue group) is
// one JSON-RPC request, answered by the same methods, at most `maxConcurrent` at once. The Redis
// and NATS clients are loaded only here, and only for the kind configured (both are optional
// peer dependencies).
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import { nanoid } from 'nanoid';
import type { Logger } from '../peer/logger.js';
import { encodeFailure } from '../protocol/encode.js';
import { ErrorCode } from '../protocol/error-codes.js';
import type { ErrorObject } from '../protocol/types.js';
import { INVALID_UTF8_REPLY, strictUtf8 } from '../protocol/invalid-utf8.js';
import type { ApiCaller } from './auth.js';
import type { ServerApiConsume } from './config.js';
import { defineTake, renewEntries, takeEntries } from './stream-take.js';
import type { TakenEntry } from './stream-take.js';
import { StreamWake } from './stream-wake.js';
import type { ConsumerFigures } from './consumer-metrics.js';
import { Fifo } from '../pubsub/fifo.js';

/** Who a consumed request is from: whoever could write to the stream or subject. */
const BROKER_CALLER: ApiCaller = Object.freeze({ kind: 'broker' });
/** How soon a read that found no entry is made again where Redis refuses tracking, in ms. */
const POLL_MS = 50;
/** How soon a read that failed (Redis unreachable) is tried again, in ms. */
const RETRY_MS = 500;

type Answer = (text: string, caller: ApiCaller) => Promise<string | undefined>;

/** What the consumers do with a request text: answer it, or refuse it for want of room. */
export interface ConsumerHandling {
  answer: Answer;
  /** The reply to a request refused (NATS, its queue full): `-32000 Server busy`. */
  busy: (text: string) => string;
  /** `error` under each request's id of `text` (NATS: a reply too large to send as it is). */
  failure: (text: string, error: ErrorObject) => string;
  /**
   * The largest request taken, in UTF-8 bytes (`serverApi.maxBodyBytes`, the bound HTTP bodies
   * get too): a larger one is refused unread, never handled.
   */
  maxBytes: number;
  /** Where the consumer's state and counts go (its metrics). */
  figures: ConsumerFigures;
}

/**
 * The reply to a request over `maxBytes`: -32600 with `data: { maxBodyBytes }` under id null
 * (the text is not parsed for its id: not reading it is the point).
 */
function tooLargeReply(maxBytes: number): string {
  return encodeFailure(null, {
    code: ErrorCode.InvalidRequest,
    message: 'Request too large',
    data: { maxBodyBytes: maxBytes },
  });
}

export interface Consumer {
  /**
   * It reads its broker now: Redis, its last read worked (false from a failed one until the
   * next that works); NATS, connected with its subscription. False once closed.
   */
  readonly up: boolean;
  close(): Promise<void>;
}

/**
 * The consumer's `up`, kept in its figures too. False for good once closed: a read under way
 * then, answered afterwards, must not show a closing consumer up (readiness follows it).
 */
class UpState {
  private value = false;
  private closed = false;

  constructor(private readonly figures: ConsumerFigures) {}

  get up(): boolean {
    return this.value;
  }

  set up(up: boolean) {
    if (this.closed) return;
    this.value = up;
    this.figures.up = up;
  }

  close(): void {
    this.up = false;
    this.closed = true;
  }
}

export async function startConsumer(
  consume: ServerApiConsume,
  brokerUrl: string | undefined,
  handling: ConsumerHandling,
  logger: Logger,
): Promise<Consumer> {
  const url = consume.url ?? brokerUrl;
  if (url === undefined) {
    throw new TypeError(
      `serverApi.consume.url is required: no broker URL to take the ${consume.kind === 'redis' ? 'Redis stream' : 'NATS subject'} from`,
    );
  }
  return consume.kind === 'redis'
    ? consumeRedis(url, consume, handling, logger)
    : consumeNats(url, consume, handling, logger);
}

/** Answer one consumed request; never rejects (what failed is logged). */
async function handle(
  text: string,
  answer: Answer,
  logger: Logger,
  where: Record<string, unknown>,
): Promise<string | undefined> {
  try {
    const reply = await answer(text, BROKER_CALLER);
    // Nobody may read a stream entry's answer: an error is worth a line in the log (its id,
    // code and message; not the reply, which may be megabytes).
    const errors = reply?.includes('"error"') ? errorsOf(reply) : [];
    if (errors.length > 0) {
      logger.warn(
        { ...where, errors: errors.slice(0, LOGGED_ERRORS), failed: errors.length },
        'server API: a consumed request failed',
      );
    }
    return reply;
  } catch (err) {
    logger.warn({ ...where, err }, 'server API: a consumed request could not be answered');
    return undefined;
  }
}

/** The most errors of one reply (a batch's) a log line names. */
const LOGGED_ERRORS = 10;

/** The errors a reply (ours: valid JSON, one response or a batch of them) holds: id, code, message. */
function errorsOf(reply: string): { id: unknown; code: unknown; message: unknown }[] {
  const parsed = JSON.parse(reply) as unknown;
  const responses = (Array.isArray(parsed) ? parsed : [parsed]) as Record<string, unknown>[];
  return responses.flatMap((response) => {
    const error = response['error'] as Record<string, unknown> | undefined;
    return error ? [{ id: response['id'], code: error['code'], message: error['message'] }] : [];
  });
}

/**
 * The error a NATS request gets in place of a reply larger than the server carries: handled,
 * its reply could not be sent.
 */
function replyTooLarge(bytes: number, maxPayload: number): ErrorObject {
  return {
    code: ErrorCode.InternalError,
    message: "The reply is larger than the NATS server's max_payload",
    data: { reason: 'reply too large', bytes, maxPayload, handled: true },
  };
}

/**
 * Slots for the requests handled at once: `run` takes one for a request's work and frees it
 * when the work settles, then calls `onFree`; `freed` resolves once one is free (at once if one
 * is), or when `wake` is called (closing).
 */
class Slots {
  private used = 0;
  private waiter: (() => void) | undefined;
  private readonly running = new Set<Promise<void>>();

  constructor(
    readonly max: number,
    private readonly figures: ConsumerFigures,
    private readonly onFree: () => void = () => undefined,
  ) {}

  get free(): number {
    return this.max - this.used;
  }

  /** Run `work` in a slot (the caller saw one free); its slot is free again once it settles. */
  run(work: () => Promise<void>): void {
    this.figures.inProgress = ++this.used;
    const done = work().finally(() => {
      this.figures.inProgress = --this.used;
      this.running.delete(done);
      this.wake();
      this.onFree();
    });
    this.running.add(done);
  }

  freed(): Promise<void> {
    if (this.free > 0) return Promise.resolve();
    return new Promise((resolve) => (this.waiter = resolve));
  }

  wake(): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.();
  }

  /** Resolves once no request is running (those `onFree` starts meanwhile included). */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }
}

/**
 * Entries of `stream` read as `group`: every entry is handled, then acknowledged, whatever its
 * outcome (a request that fails is logged, never retried forever). An entry whose field
 * `request` is missing, holds more than `maxBytes`, or is not UTF-8, is logged and acknowledged
 * unhandled (a stream entry has nowhere to be answered); the first two never leave Redis (see
 * stream-take.ts): a read brings in at most one request of `maxBytes` per free slot. Entries
 * another consumer of the group took and left unacknowledged for `claimIdleMs` (its node died)
 * are taken over the same way, at start and every `claimIdleMs`. The entries being handled here
 * are marked not idle every third of it (renewEntries), so a request handled for longer is
 * not taken over and run a second time; one taken again while it runs here runs once. An entry
 * taken over after `maxDeliveries` deliveries (every node that took it died or stalled with it)
 * is not run again: the script copies it to `deadLetterStream` and acknowledges it.
 *
 * A read whose reply the connection lost has left the entries it took pending for this
 * consumer: after a lost connection or a failed read, the next read takes those again first
 * (those being handled left out), so they run now and in the stream's order.
 *
 * At most `maxConcurrent` entries are handled at once, started in the stream's order: each read
 * asks for no more entries than there are free slots, and none is made while every slot is
 * taken, so the rest wait in the stream (for this node's other consumers of the group too).
 * A read that finds nothing waits for the stream to be written (StreamWake: Redis tells a
 * connection of the consumer's own that the key changed, never what it holds; a blocking read
 * would bring the entries in unchecked), or for the next takeover, so an idle consumer runs no
 * command. Where Redis refuses that (or while its connection is being made again), the read is
 * made again POLL_MS later.
 *
 * The group is made from the stream's start when no other group reads the stream (entries
 * written before any node started are handled), else from its end (startOfNewGroup). It goes
 * with the stream (Redis restarted without persistence, the key deleted): a read that finds it
 * gone (NOGROUP) makes it again after the last entry this node read when the stream still holds
 * that entry, else from the stream's start, so every entry written since is handled
 * (groupStartAfterLoss). A read that fails otherwise is logged once per outage, and tried again
 * every RETRY_MS. The consumer shows down (`up`, and its metric) from a lost connection or a
 * failed read until a read works again.
 */
async function consumeRedis(
  url: string,
  consume: Extract<ServerApiConsume, { kind: 'redis' }>,
  { answer, maxBytes, figures }: ConsumerHandling,
  logger: Logger,
): Promise<Consumer> {
  const { stream, group } = consume;
  const state = new UpState(figures);
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, {
    connectionName: 'wsrpc-server-api',
    maxRetriesPerRequest: null,
    lazyConnect: true,
  });
  redis.on('error', (err: Error) =>
    logger.warn({ err }, 'server API: Redis consumer connection error'),
  );
  defineTake(redis);
  try {
    await redis.connect();
    await createGroup(redis, stream, group, await startOfNewGroup(redis, stream));
  } catch (err) {
    redis.disconnect();
    throw err;
  }
  const consumer = `${hostname()}-${process.pid}-${nanoid(6)}`;
  const wake = new StreamWake(redis, stream, logger);
  const slots = new Slots(consume.maxConcurrent, figures);
  state.up = true;
  let closed = false;
  /** Ids of the entries being handled here, from their take to their acknowledgement. */
  const handling = new Set<string>();
  /** The id of the last entry a read of new entries took (where a group made again starts). */
  let lastRead: string | undefined;
  /**
   * A read's reply may have been lost with the connection, the entries it took left pending
   * for this consumer: the next read takes them again first (takeEntries' `own`).
   */
  let recover = false;
  const renewal = setInterval(() => {
    if (handling.size === 0 || !connected) return;
    renewEntries(redis, stream, group, consumer, handling).catch((err: unknown) =>
      logger.debug({ err, stream }, 'server API: marking stream entries in progress failed'),
    );
  }, consume.claimIdleMs / 3);
  renewal.unref();
  // Closing while Redis is away: what waits for it is given up (ioredis would hold it until
  // Redis is back, even once disconnected).
  let giveUp!: (err: Error) => void;
  const givenUp = new Promise<never>((_resolve, reject) => (giveUp = reject));
  givenUp.catch(() => undefined);
  const orGivenUp = <T>(command: Promise<T>): Promise<T> => Promise.race([command, givenUp]);
  // Commands wait while Redis is away (maxRetriesPerRequest: null), so a read does not fail
  // then: the lost connection is what shows the consumer down, until a read works again.
  let connected = true;
  redis.on('ready', () => {
    connected = true;
    // What a read lost with the connection took is read again now, not at the next write.
    if (recover) wake.poke();
  });
  redis.on('close', () => {
    if (!connected || closed) return;
    connected = false;
    recover = true;
    state.up = false;
    figures.failures.disconnected++;
  });
  // Requests are read as bytes: one that is not UTF-8 is refused, not read with U+FFFD.
  const handleEntry = async (entry: TakenEntry): Promise<void> => {
    const { id } = entry;
    if ('refused' in entry) {
      // Acknowledged by the script already.
      if (entry.refused === 'too large') {
        figures.consumed.too_large++;
        logger.warn(
          { stream, id, maxBodyBytes: maxBytes },
          'server API: stream entry over maxBodyBytes; not handled',
        );
      } else if (entry.refused === 'delivered too often') {
        figures.consumed.delivered_too_often++;
        const { deliveries } = entry;
        const { maxDeliveries, deadLetterStream } = consume;
        logger.error(
          { stream, id, deliveries, maxDeliveries, deadLetterStream },
          deadLetterStream === undefined
            ? 'server API: stream entry taken over after maxDeliveries; dropped, not handled'
            : 'server API: stream entry taken over after maxDeliveries; moved to the dead-letter stream, not handled',
        );
      } else {
        figures.consumed.invalid++;
        logger.warn({ stream, id }, 'server API: stream entry without a request field');
      }
      return;
    }
    const text = strictUtf8(entry.request);
    if (text === undefined) {
      figures.consumed.invalid++;
      logger.warn({ stream, id }, 'server API: stream entry not UTF-8; not handled');
    } else {
      await handle(text, answer, logger, { stream, id });
      figures.consumed.handled++;
    }
    try {
      await orGivenUp(redis.xack(stream, group, id));
    } catch (err) {
      // Left pending: XAUTOCLAIM hands it to a consumer again after claimIdleMs.
      logger.warn({ err, stream, id }, 'server API: acknowledging a stream entry failed');
    } finally {
      handling.delete(id);
    }
  };
  const start = (entries: TakenEntry[]): void => {
    for (const entry of entries) {
      if ('refused' in entry) void handleEntry(entry);
      // Taken again while handled here (a takeover of this node's own entry after a stall):
      // it runs once; its acknowledgement ends both.
      else if (!handling.has(entry.id)) {
        handling.add(entry.id);
        slots.run(() => handleEntry(entry));
      }
    }
  };
  const pause = new Pause();
  let nextClaim = Date.now();
  let failures = 0;
  const loop = (async () => {
    while (!closed) {
      await slots.freed();
      if (closed) break;
      try {
        const recovering = recover;
        recover = false;
        const claiming = !recovering && Date.now() >= nextClaim;
        if (claiming) nextClaim = Date.now() + consume.claimIdleMs;
        const count = slots.free;
        // Cleared before the read: a write it does not see wakes the wait below.
        wake.clear();
        let taken: TakenEntry[];
        try {
          taken = await orGivenUp(
            takeEntries(redis, {
              stream,
              group,
              consumer,
              count,
              maxBytes,
              maxDeliveries: consume.maxDeliveries,
              deadLetter: consume.deadLetterStream,
              ...(claiming ? { claimIdleMs: consume.claimIdleMs } : {}),
              ...(recovering ? { own: [...handling] } : {}),
            }),
          );
        } catch (err) {
          recover = true;
          throw err;
        }
        if (!claiming && !recovering && taken.length > 0) lastRead = taken[taken.length - 1]!.id;
        // A full read of its own entries may have left more behind: the next read goes on.
        if (recovering && taken.length === count) recover = true;
        state.up = true;
        if (failures > 0) {
          logger.info({ stream, failures }, 'server API: reading the Redis stream again');
          failures = 0;
        }
        start(taken);
        // A full takeover may have left more behind: the next round takes over again.
        if (claiming && taken.length === count) nextClaim = Date.now();
        if (taken.length === 0 && !claiming && !recovering) {
          if (wake.watching) await wake.wait(Math.max(0, nextClaim - Date.now()));
          else await pause.for(POLL_MS);
        }
      } catch (readErr) {
        if (closed) break;
        let err = readErr;
        if (/NOGROUP/.test((err as Error).message)) {
          figures.failures.group_lost++;
          // One that cannot be made is a failed read: retried after RETRY_MS, not at once.
          const made = await orGivenUp(
            groupStartAfterLoss(redis, stream, lastRead).then((from) => {
              logger.warn(
                { stream, group, from },
                'server API: the stream or its consumer group is gone; making the group again',
              );
              return createGroup(redis, stream, group, from);
            }),
          ).then(
            () => true,
            (groupErr: unknown) => ((err = groupErr), false),
          );
          if (made || closed) continue;
        }
        figures.failures.read++;
        state.up = false;
        if (failures++ === 0) {
          logger.warn({ err, stream }, 'server API: reading the Redis stream failed; retrying');
        }
        await pause.for(RETRY_MS);
      }
    }
  })();
  return {
    get up() {
      return state.up;
    },
    close: async () => {
      closed = true;
      state.close();
      // A Redis that is away would hold the read (and acknowledgements) under way until it is
      // back: they fail at once instead (an entry left unacknowledged is taken over later).
      const away = (): void => {
        redis.disconnect();
        giveUp(new Error('closed while Redis is away'));
      };
      redis.on('close', away);
      if (redis.status !== 'ready') away();
      slots.wake();
      pause.end();
      wake.close();
      await loop;
      await slots.settled();
      clearInterval(renewal);
      if (redis.status === 'ready') {
        // Each start reads as a consumer of its own: one left in the group for every start
        // before would pile up. Deleted only while it holds no entry (deleting a consumer drops
        // its unacknowledged entries from the group, which no takeover would then find).
        await leaveGroup(redis, stream, group, consumer).catch((err: unknown) =>
          logger.debug({ err, stream }, 'server API: leaving the consumer group failed'),
        );
        await redis.quit().catch(() => redis.disconnect());
      }
    },
  };
}

/**
 * Where the group starts when this node makes it first: at the stream's start when no group
 * reads the stream (or there is no stream yet): what backends wrote before any gateway started
 * is requests too. At its end when another group reads it: the stream's entries are that
 * group's (a group renamed in the configuration does not run them again).
 */
async function startOfNewGroup(redis: Redis, stream: string): Promise<'$' | '0'> {
  try {
    const groups = (await redis.xinfo('GROUPS', stream)) as unknown[];
    return groups.length === 0 ? '0' : '$';
  } catch (err) {
    if (/no such key/i.test((err as Error).message)) return '0';
    throw err;
  }
}

/**
 * Where a group found gone starts again: after the last entry this node read, when the stream
 * still holds it (the group alone was deleted: what was handled before it is not run again);
 * else at the stream's start (the stream went with it, Redis restarted without persistence: all
 * it holds was written since).
 */
async function groupStartAfterLoss(
  redis: Redis,
  stream: string,
  lastRead: string | undefined,
): Promise<string> {
  if (lastRead === undefined) return '0';
  const still = await redis.xrange(stream, lastRead, lastRead);
  return still.length > 0 ? lastRead : '0';
}

/** Delete `consumer` from the group when it holds no unacknowledged entry. */
async function leaveGroup(
  redis: Redis,
  stream: string,
  group: string,
  consumer: string,
): Promise<void> {
  const held = (await redis.xpending(stream, group, '-', '+', 1, consumer)) as unknown[];
  if (held.length === 0) await redis.xgroup('DELCONSUMER', stream, group, consumer);
}

/** XGROUP CREATE … MKSTREAM from `from`; a group that exists already is left as it is. */
async function createGroup(
  redis: Redis,
  stream: string,
  group: string,
  from: string,
): Promise<void> {
  try {
    await redis.xgroup('CREATE', stream, group, from, 'MKSTREAM');
  } catch (err) {
    if (!/BUSYGROUP/.test((err as Error).message)) throw err;
  }
}

/** A wait that `end` cuts short (closing), and every later one too. */
class Pause {
  private ended = false;
  private cut: (() => void) | undefined;

  for(ms: number): Promise<void> {
    if (this.ended) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.cut = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  end(): void {
    this.ended = true;
    this.cut?.();
  }
}

/**
 * A queue-group subscription on `subject`: one node of the group takes each message; a request
 * with a reply subject gets the JSON-RPC reply there (an empty message for a notification).
 *
 * At most `maxConcurrent` messages are handled at once. A core NATS subscription cannot be told
 * to stop delivering (the server pushes; the client reads its socket whatever the callback
 * does, and JetStream would change what the subject is), so the messages beyond wait here, in
 * arrival order, at most `maxQueued` of them; a message beyond that is refused at once: its
 * reply subject, if any, gets `-32000 Server busy` (under each request's id), and the refusals
 * are logged once per overload with their count when it ends. The requester learns it at once
 * and can try again or elsewhere, instead of the node holding an unbounded backlog.
 *
 * A message over `maxBytes` is refused at once, neither queued nor handled: its reply subject
 * gets -32600 `Request too large`, and it is logged. So is one that is not UTF-8 (no JSON text):
 * -32700 under id null, `data.reason` "invalid UTF-8".
 *
 * The client reconnects by itself (and subscribes again): the consumer is shown down from the
 * connection's loss until it is back, and for good if the server closes the subscription.
 */
async function consumeNats(
  url: string,
  consume: Extract<ServerApiConsume, { kind: 'nats' }>,
  handling: ConsumerHandling,
  logger: Logger,
): Promise<Consumer> {
  const { subject, queue: group, maxConcurrent, maxQueued } = consume;
  const { maxBytes, figures } = handling;
  const state = new UpState(figures);
  const { connect } = await import('@nats-io/transport-node');
  const nc = await connect({ servers: url, name: 'wsrpc-server-api', maxReconnectAttempts: -1 });
  type Message = {
    data: Uint8Array;
    reply?: string;
    respond(data: string): boolean;
  };
  /** A message taken: its text (checked UTF-8 on arrival), and where its reply goes. */
  type Taken = { text: string; msg: Message };
  const waiting = new Fifo<Taken>();
  let refused = 0;
  /**
   * Send `text` to `msg`'s reply subject. A reply to `request` larger than the server takes
   * (its max_payload; NATS would refuse it and the requester wait out its timeout) goes as
   * an error under each request's id instead.
   */
  const reply = (msg: Message, text: string, request?: string): void => {
    // respond throws on a closed connection: logged, never an unhandled exception.
    try {
      if (!msg.reply) return;
      const maxPayload = nc.info?.max_payload;
      const bytes = maxPayload === undefined ? 0 : Buffer.byteLength(text);
      if (request !== undefined && maxPayload !== undefined && bytes > maxPayload) {
        figures.failures.reply_too_large++;
        logger.warn(
          { subject, bytes, maxPayload },
          "server API: a reply over the NATS server's max_payload; sent as -32603 instead",
        );
        msg.respond(handling.failure(request, replyTooLarge(bytes, maxPayload)));
      } else msg.respond(text);
    } catch (err) {
      logger.warn({ err, subject }, 'server API: could not reply');
    }
  };
  const slots: Slots = new Slots(maxConcurrent, figures, () => {
    const next = waiting.shift();
    figures.queued = waiting.length;
    if (next) run(next);
    else if (refused > 0) {
      logger.warn({ subject, refused }, 'server API: NATS consumer caught up');
      refused = 0;
    }
  });
  const run = ({ text, msg }: Taken): void =>
    slots.run(async () => {
      const answer = await handle(text, handling.answer, logger, { subject });
      figures.consumed.handled++;
      reply(msg, answer ?? '', text);
    });
  const subscription = nc.subscribe(subject, {
    queue: group,
    callback: (err, msg) => {
      if (err) {
        figures.failures.subscription++;
        logger.warn({ err, subject }, 'server API: NATS subscription error');
        return;
      }
      if (msg.data.length > maxBytes) {
        figures.consumed.too_large++;
        logger.warn(
          { subject, bytes: msg.data.length, maxBodyBytes: maxBytes },
          'server API: NATS message over maxBodyBytes; refused',
        );
        reply(msg, tooLargeReply(maxBytes));
        return;
      }
      const text = strictUtf8(msg.data);
      if (text === undefined) {
        figures.consumed.invalid++;
        logger.warn({ subject }, 'server API: NATS message not UTF-8; refused');
        reply(msg, INVALID_UTF8_REPLY);
        return;
      }
      const taken = { text, msg };
      if (slots.free > 0) run(taken);
      else if (waiting.length < maxQueued) {
        waiting.push(taken);
        figures.queued = waiting.length;
      } else {
        figures.consumed.busy++;
        if (refused++ === 0) {
          logger.warn(
            { subject, maxConcurrent, maxQueued },
            'server API: NATS consumer full; refusing messages with -32000 until it catches up',
          );
        }
        reply(msg, handling.busy(text));
      }
    },
  });
  let closing = false;
  let subscribed = true;
  void subscription.closed.then((err) => {
    subscribed = false;
    if (closing) return;
    state.up = false;
    logger.warn({ err, subject }, 'server API: the NATS subscription closed; nothing is consumed');
  });
  void (async () => {
    for await (const status of nc.status()) {
      if (closing) return;
      if (status.type === 'disconnect') {
        figures.failures.disconnected++;
        state.up = false;
        logger.warn({ subject }, 'server API: NATS consumer disconnected; reconnecting');
      } else if (status.type === 'reconnect') {
        state.up = subscribed;
        logger.info({ subject }, 'server API: NATS consumer reconnected');
      }
    }
  })();
  await nc.flush();
  state.up = subscribed;
  return {
    get up() {
      return state.up;
    },
    close: async () => {
      closing = true;
      state.close();
      // Messages already delivered (the drain's included) are handled before the connection closes.
      await subscription.drain().catch(() => undefined);
      await slots.settled();
      await nc.close().catch(() => undefined);
    },
  };
}

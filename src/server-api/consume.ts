// The broker-consumed form of the server API: each entry of a Redis stream (read through a
// consumer group, so one node takes each) or each message on a NATS subject (a queue group) is
// one JSON-RPC request, answered by the same methods, at most `maxConcurrent` at once. The Redis
// and NATS clients are loaded only here, and only for the kind configured (both are optional
// peer dependencies).
import { hostname } from 'node:os';
import { nanoid } from 'nanoid';
import type { Logger } from '../peer/logger.js';
import { encodeFailure } from '../protocol/encode.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { INVALID_UTF8_REPLY, strictUtf8 } from '../protocol/invalid-utf8.js';
import type { ApiCaller } from './auth.js';
import type { ServerApiConsume } from './config.js';
import { Fifo } from '../pubsub/fifo.js';

/** Who a consumed request is from: whoever could write to the stream or subject. */
const BROKER_CALLER: ApiCaller = Object.freeze({ kind: 'broker' });
/** How long one XREADGROUP blocks, in ms (close waits at most this). */
const BLOCK_MS = 1_000;
/** An entry a consumer took and did not acknowledge for this long is taken over (its node died). */
const CLAIM_IDLE_MS = 60_000;

type Answer = (text: string, caller: ApiCaller) => Promise<string | undefined>;

/** What the consumers do with a request text: answer it, or refuse it for want of room. */
export interface ConsumerHandling {
  answer: Answer;
  /** The reply to a request refused (NATS, its queue full): `-32000 Server busy`. */
  busy: (text: string) => string;
  /**
   * The largest request taken, in UTF-8 bytes (`serverApi.maxBodyBytes`, the bound HTTP bodies
   * get too): a larger one is refused unread, never handled.
   */
  maxBytes: number;
}

/** The field of a stream entry that holds its request. */
const REQUEST_FIELD = Buffer.from('request');

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
  close(): Promise<void>;
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
    // Nobody may read a stream entry's answer: an error is worth a line in the log.
    if (reply?.includes('"error"'))
      logger.warn({ ...where, reply }, 'server API: a consumed request failed');
    return reply;
  } catch (err) {
    logger.warn({ ...where, err }, 'server API: a consumed request could not be answered');
    return undefined;
  }
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
    private readonly onFree: () => void = () => undefined,
  ) {}

  get free(): number {
    return this.max - this.used;
  }

  /** Run `work` in a slot (the caller saw one free); its slot is free again once it settles. */
  run(work: () => Promise<void>): void {
    this.used++;
    const done = work().finally(() => {
      this.used--;
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
 * XREADGROUP on `stream` as `group`: every entry is handled, then acknowledged, whatever its
 * outcome (a request that fails is logged, never retried forever). An entry whose field
 * `request` is missing, holds more than `maxBytes`, or is not UTF-8, is logged and acknowledged
 * unhandled (a stream entry has nowhere to be answered). Entries another consumer of the group took
 * and left unacknowledged for CLAIM_IDLE_MS (its node died) are taken over (XAUTOCLAIM).
 *
 * At most `maxConcurrent` entries are handled at once, started in the stream's order: each read
 * asks for no more entries than there are free slots, and none is made while every slot is
 * taken, so the rest wait in the stream (for this node's other consumers of the group too).
 * The reads block on a connection of their own; the acknowledgements go on another, so one is
 * never held behind a blocked read.
 */
async function consumeRedis(
  url: string,
  consume: Extract<ServerApiConsume, { kind: 'redis' }>,
  { answer, maxBytes }: ConsumerHandling,
  logger: Logger,
): Promise<Consumer> {
  const { stream, group } = consume;
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, {
    connectionName: 'wsrpc-server-api',
    maxRetriesPerRequest: null,
    lazyConnect: true,
  });
  redis.on('error', (err: Error) =>
    logger.warn({ err }, 'server API: Redis consumer connection error'),
  );
  await redis.connect();
  const acks = redis.duplicate({ connectionName: 'wsrpc-server-api-ack' });
  acks.on('error', (err: Error) =>
    logger.warn({ err }, 'server API: Redis consumer connection error'),
  );
  try {
    await acks.connect();
    await redis.xgroup('CREATE', stream, group, '$', 'MKSTREAM');
  } catch (err) {
    if (!/BUSYGROUP/.test((err as Error).message)) {
      redis.disconnect();
      acks.disconnect();
      throw err;
    }
  }
  const consumer = `${hostname()}-${process.pid}-${nanoid(6)}`;
  const slots = new Slots(consume.maxConcurrent);
  let closed = false;
  // Entries are read as bytes: a request that is not UTF-8 is refused, not read with U+FFFD.
  const handleEntry = async (id: string, fields: Buffer[]): Promise<void> => {
    const at = fields.findIndex((field, index) => index % 2 === 0 && field.equals(REQUEST_FIELD));
    const request = at >= 0 ? fields[at + 1] : undefined;
    const text = request && request.length <= maxBytes ? strictUtf8(request) : undefined;
    if (request === undefined)
      logger.warn({ stream, id }, 'server API: stream entry without a request field');
    else if (request.length > maxBytes) {
      logger.warn(
        { stream, id, maxBodyBytes: maxBytes },
        'server API: stream entry over maxBodyBytes; not handled',
      );
    } else if (text === undefined) {
      logger.warn({ stream, id }, 'server API: stream entry not UTF-8; not handled');
    } else await handle(text, answer, logger, { stream, id });
    try {
      await acks.xack(stream, group, id);
    } catch (err) {
      // Left pending: XAUTOCLAIM hands it to a consumer again after CLAIM_IDLE_MS.
      logger.warn({ err, stream, id }, 'server API: acknowledging a stream entry failed');
    }
  };
  const start = (entries: [Buffer, Buffer[]][]): void => {
    // Entry ids are ASCII (`<ms>-<seq>`).
    for (const [id, fields] of entries) slots.run(() => handleEntry(id.toString('latin1'), fields));
  };
  let nextClaim = Date.now() + CLAIM_IDLE_MS;
  const loop = (async () => {
    while (!closed) {
      await slots.freed();
      if (closed) break;
      try {
        if (Date.now() >= nextClaim) {
          nextClaim = Date.now() + CLAIM_IDLE_MS;
          // ioredis has no Buffer form of XAUTOCLAIM by name.
          const claimed = (await redis.callBuffer('XAUTOCLAIM', [
            stream,
            group,
            consumer,
            CLAIM_IDLE_MS,
            '0-0',
            'COUNT',
            slots.free,
          ])) as [Buffer, [Buffer, Buffer[]][]];
          start(claimed[1].filter((entry) => entry !== null));
          if (slots.free === 0) continue;
        }
        const read = (await redis.xreadgroupBuffer(
          'GROUP',
          group,
          consumer,
          'COUNT',
          slots.free,
          'BLOCK',
          BLOCK_MS,
          'STREAMS',
          stream,
          '>',
        )) as [Buffer, [Buffer, Buffer[]][]][] | null;
        for (const [, entries] of read ?? []) start(entries);
      } catch (err) {
        if (closed) break;
        logger.warn({ err, stream }, 'server API: reading the Redis stream failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  })();
  return {
    close: async () => {
      closed = true;
      slots.wake();
      await loop;
      await slots.settled();
      await Promise.all(
        [redis, acks].map((connection) => connection.quit().catch(() => connection.disconnect())),
      );
    },
  };
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
 */
async function consumeNats(
  url: string,
  consume: Extract<ServerApiConsume, { kind: 'nats' }>,
  handling: ConsumerHandling,
  logger: Logger,
): Promise<Consumer> {
  const { subject, queue: group, maxConcurrent, maxQueued } = consume;
  const { maxBytes } = handling;
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
  const reply = (msg: Message, text: string): void => {
    // respond throws on a closed connection: logged, never an unhandled exception.
    try {
      if (msg.reply) msg.respond(text);
    } catch (err) {
      logger.warn({ err, subject }, 'server API: could not reply');
    }
  };
  const slots: Slots = new Slots(maxConcurrent, () => {
    const next = waiting.shift();
    if (next) run(next);
    else if (refused > 0) {
      logger.warn({ subject, refused }, 'server API: NATS consumer caught up');
      refused = 0;
    }
  });
  const run = ({ text, msg }: Taken): void =>
    slots.run(async () => {
      const answer = await handle(text, handling.answer, logger, { subject });
      reply(msg, answer ?? '');
    });
  const subscription = nc.subscribe(subject, {
    queue: group,
    callback: (err, msg) => {
      if (err) {
        logger.warn({ err, subject }, 'server API: NATS subscription error');
        return;
      }
      if (msg.data.length > maxBytes) {
        logger.warn(
          { subject, bytes: msg.data.length, maxBodyBytes: maxBytes },
          'server API: NATS message over maxBodyBytes; refused',
        );
        reply(msg, tooLargeReply(maxBytes));
        return;
      }
      const text = strictUtf8(msg.data);
      if (text === undefined) {
        logger.warn({ subject }, 'server API: NATS message not UTF-8; refused');
        reply(msg, INVALID_UTF8_REPLY);
        return;
      }
      const taken = { text, msg };
      if (slots.free > 0) run(taken);
      else if (waiting.length < maxQueued) waiting.push(taken);
      else {
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
  await nc.flush();
  return {
    close: async () => {
      // Messages already delivered (the drain's included) are handled before the connection closes.
      await subscription.drain().catch(() => undefined);
      await slots.settled();
      await nc.close().catch(() => undefined);
    },
  };
}

// The broker-consumed form of the server API: each entry of a Redis stream (read through a
// consumer group, so one node takes each) or each message on a NATS subject (a queue group) is
// one JSON-RPC request, answered by the same methods. The Redis and NATS clients are loaded only
// here, and only for the kind configured (both are optional peer dependencies).
import { hostname } from 'node:os';
import { nanoid } from 'nanoid';
import type { Logger } from '../peer/logger.js';
import type { ApiCaller } from './auth.js';
import type { ServerApiConsume } from './config.js';

/** Who a consumed request is from: whoever could write to the stream or subject. */
const BROKER_CALLER: ApiCaller = Object.freeze({ kind: 'broker' });
/** Entries read per XREADGROUP. */
const BATCH = 16;
/** How long one XREADGROUP blocks, in ms (close waits at most this). */
const BLOCK_MS = 1_000;
/** An entry a consumer took and did not acknowledge for this long is taken over (its node died). */
const CLAIM_IDLE_MS = 60_000;

type Answer = (text: string, caller: ApiCaller) => Promise<string | undefined>;

export interface Consumer {
  close(): Promise<void>;
}

export async function startConsumer(
  consume: ServerApiConsume,
  brokerUrl: string | undefined,
  answer: Answer,
  logger: Logger,
): Promise<Consumer> {
  const url = consume.url ?? brokerUrl;
  if (url === undefined) {
    throw new TypeError(
      `serverApi.consume.url is required: no broker URL to take the ${consume.kind === 'redis' ? 'Redis stream' : 'NATS subject'} from`,
    );
  }
  return consume.kind === 'redis'
    ? consumeRedis(url, consume.stream, consume.group, answer, logger)
    : consumeNats(url, consume.subject, consume.queue, answer, logger);
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
 * XREADGROUP on `stream` as `group`: every entry is handled, then acknowledged, whatever its
 * outcome (a request that fails is logged, never retried forever). An entry whose field
 * `request` is missing is logged and acknowledged. Entries another consumer of the group took
 * and left unacknowledged for CLAIM_IDLE_MS (its node died) are taken over (XAUTOCLAIM).
 */
async function consumeRedis(
  url: string,
  stream: string,
  group: string,
  answer: Answer,
  logger: Logger,
): Promise<Consumer> {
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
  try {
    await redis.xgroup('CREATE', stream, group, '$', 'MKSTREAM');
  } catch (err) {
    if (!/BUSYGROUP/.test((err as Error).message)) {
      redis.disconnect();
      throw err;
    }
  }
  const consumer = `${hostname()}-${process.pid}-${nanoid(6)}`;
  let closed = false;
  const handleEntries = async (entries: [string, string[]][]): Promise<void> => {
    for (const [id, fields] of entries) {
      const at = fields.indexOf('request');
      const text = at >= 0 && at % 2 === 0 ? fields[at + 1] : undefined;
      if (text === undefined)
        logger.warn({ stream, id }, 'server API: stream entry without a request field');
      else await handle(text, answer, logger, { stream, id });
      await redis.xack(stream, group, id);
    }
  };
  let nextClaim = Date.now() + CLAIM_IDLE_MS;
  const loop = (async () => {
    while (!closed) {
      try {
        if (Date.now() >= nextClaim) {
          nextClaim = Date.now() + CLAIM_IDLE_MS;
          const claimed = (await redis.xautoclaim(
            stream,
            group,
            consumer,
            CLAIM_IDLE_MS,
            '0-0',
            'COUNT',
            BATCH,
          )) as [string, [string, string[]][]];
          await handleEntries(claimed[1].filter((entry) => entry !== null));
        }
        const read = (await redis.xreadgroup(
          'GROUP',
          group,
          consumer,
          'COUNT',
          BATCH,
          'BLOCK',
          BLOCK_MS,
          'STREAMS',
          stream,
          '>',
        )) as [string, [string, string[]][]][] | null;
        for (const [, entries] of read ?? []) await handleEntries(entries);
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
      await loop;
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/**
 * A queue-group subscription on `subject`: one node of the group takes each message; a request
 * with a reply subject gets the JSON-RPC reply there (an empty message for a notification).
 */
async function consumeNats(
  url: string,
  subject: string,
  queue: string,
  answer: Answer,
  logger: Logger,
): Promise<Consumer> {
  const { connect } = await import('@nats-io/transport-node');
  const nc = await connect({ servers: url, name: 'wsrpc-server-api', maxReconnectAttempts: -1 });
  const running = new Set<Promise<void>>();
  const subscription = nc.subscribe(subject, {
    queue,
    callback: (err, msg) => {
      if (err) {
        logger.warn({ err, subject }, 'server API: NATS subscription error');
        return;
      }
      const work = handle(msg.string(), answer, logger, { subject })
        .then((reply) => {
          if (msg.reply) msg.respond(reply ?? '');
        })
        // respond throws on a closed connection: logged, never an unhandled rejection.
        .catch((err: unknown) => logger.warn({ err, subject }, 'server API: could not reply'));
      running.add(work);
      void work.finally(() => running.delete(work));
    },
  });
  await nc.flush();
  return {
    close: async () => {
      await subscription.drain().catch(() => undefined);
      await Promise.allSettled([...running]);
      await nc.close().catch(() => undefined);
    },
  };
}

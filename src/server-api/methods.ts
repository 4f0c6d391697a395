// The server API's methods: what a backend can ask of the gateway. Params by name, checked here
// (-32602 naming the field); each method's reference is in docs/gateway-mode.md.
import { setMaxListeners } from 'node:events';
import type { Logger } from '../peer/logger.js';
import { MethodRegistry } from '../peer/method-registry.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { JsonRpcError, ServerError } from '../protocol/errors.js';
import type { Params } from '../protocol/types.js';
import type { Gateway } from '../server/gateway.js';
import { MAX_DENY_FOR_MS } from '../pubsub/deny-list.js';
import { NodeReading } from '../server/pubsub-history.js';
import { Slots } from '../pubsub/slots.js';
import { callerKey } from './auth.js';
import { readApiHistoryPage } from './history-page.js';
import type { ApiCaller } from './auth.js';
import type { ServerApiConfig } from './config.js';
import type { NodeRequests } from './node-requests.js';
import {
  clientMethod,
  invalid,
  named,
  optionalInteger,
  optionalText,
  exceptIds,
  passedParams,
  text,
  topicName,
} from './params.js';
import type { Tracing } from '../tracing/tracing.js';

/** The longest idempotency key, in characters. */
const MAX_KEY_LENGTH = 256;
/** The most topics one broadcast names. */
export const MAX_BROADCAST_TOPICS = 1_000;
/**
 * `members` calls reading the presence store at once on the node (each a count and a page of up
 * to 1 000 members); the others wait their turn, in order, holding no page. As
 * `limits.maxHistoryReads` bounds `history`: a backend's batches (`maxBatch` calls each, on as
 * many sockets as it opens) cannot make the node hold a page for each of them at once.
 */
export const MAX_MEMBERS_READS = 16;
/**
 * Broadcast publishes under way at once on the node, every broadcast's together; a broadcast's
 * other topics wait their turn. Each publish holds the message's payload (up to
 * `maxMessageBytes`) until the broker takes it: a broadcast to MAX_BROADCAST_TOPICS topics would
 * otherwise hold as many copies at once.
 */
export const MAX_BROADCAST_PUBLISHES = 32;
export { HISTORY_READ_PAGE } from './history-page.js';

export interface ApiMethodDeps {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any application context
  gateway: Gateway<any>;
  config: ServerApiConfig;
  nodes: NodeRequests;
  logger: Logger;
  tracing: Tracing;
}

/** The registry of the server API's methods (shared by the HTTP endpoint and the consumers). */
export function apiMethods(deps: ApiMethodDeps): MethodRegistry<ApiCaller> {
  const { gateway, config, nodes, tracing } = deps;
  const registry = new MethodRegistry<ApiCaller>();
  const memberReads = new Slots(MAX_MEMBERS_READS);
  const broadcastPublishes = new Slots(MAX_BROADCAST_PUBLISHES);

  const publish = (
    topic: string,
    data: unknown,
    key: string | undefined,
    except?: readonly string[],
  ): Promise<{ seq: number; duplicate: boolean }> =>
    tracing.span(
      'pubsub.publish ' + topic,
      { 'messaging.destination': topic },
      undefined,
      async () => {
        if (key === undefined) {
          return { seq: await gateway.publish(topic, data, { except }), duplicate: false };
        }
        return gateway.pubsub.publishOnce(topic, data, key, config.idempotencyWindowMs);
      },
    );

  registry.method('publish', async (params) => {
    const p = named(params, 'publish', ['topic', 'data', 'idempotencyKey', 'except']);
    const topic = topicName(p);
    if (!('data' in p)) throw invalid('data', 'given (any JSON value)');
    const key = optionalText(p, 'idempotencyKey', MAX_KEY_LENGTH);
    const except = exceptIds(p);
    if (key !== undefined && except !== undefined) {
      throw invalid('except', 'absent with an idempotencyKey');
    }
    return publish(topic, p['data'], key, except);
  });

  registry.method('broadcast', async (params, ctx) => {
    const p = named(params, 'broadcast', ['topics', 'data', 'except']);
    const except = exceptIds(p);
    const topics = p['topics'];
    if (!Array.isArray(topics) || topics.length === 0 || topics.length > MAX_BROADCAST_TOPICS) {
      throw invalid('topics', `an array of 1 to ${MAX_BROADCAST_TOPICS} topic names`);
    }
    const names = topics.map((topic: unknown, i) =>
      topicName({ [`topics[${i}]`]: topic }, `topics[${i}]`),
    );
    if (!('data' in p)) throw invalid('data', 'given (any JSON value)');
    const seqs: Record<string, number> = {};
    // Each topic its own publish. The first that fails fails the call, naming its topic; the
    // topics still waiting for their turn are not published, and the reply waits for those under
    // way, so that `published` names every topic that was (a retry of the rest publishes none
    // twice).
    const failures: { err: unknown; topic: string }[] = [];
    // Each topic waiting for its turn listens for the call's end: as many listeners as topics
    // (at most MAX_BROADCAST_TOPICS), which is not the leak Node warns of past ten.
    if (ctx.signal) setMaxListeners(MAX_BROADCAST_TOPICS + 1, ctx.signal);
    await Promise.all(
      names.map(async (topic) => {
        const release = await turnOf(broadcastPublishes, ctx.signal);
        try {
          if (failures.length === 0) {
            seqs[topic] = (await publish(topic, p['data'], undefined, except)).seq;
          }
        } catch (err) {
          failures.push({ err, topic });
        } finally {
          release();
        }
      }),
    );
    const [first] = failures;
    if (first) {
      const { err, topic } = first;
      if (!(err instanceof JsonRpcError)) throw err;
      const data = typeof err.data === 'object' && err.data !== null ? err.data : {};
      throw new JsonRpcError(err.code, err.message, { ...data, topic, published: seqs });
    }
    return { seqs };
  });

  registry.method('notifyUser', async (params) => {
    const p = named(params, 'notifyUser', ['user', 'method', 'params']);
    const seq = await gateway.notifyUser(
      text(p, 'user'),
      clientMethod(p),
      passedParams(p) as Params | undefined,
    );
    return seq === undefined ? {} : { seq };
  });

  registry.method('notifySession', async (params) => {
    const p = named(params, 'notifySession', ['sessionId', 'method', 'params']);
    const delivered = await gateway.notifySession(
      text(p, 'sessionId'),
      clientMethod(p),
      passedParams(p) as Params | undefined,
    );
    return { delivered };
  });

  registry.method('disconnectUser', async (params) => {
    const p = named(params, 'disconnectUser', ['user', 'reason', 'denyForMs']);
    const user = text(p, 'user');
    const reason = optionalText(p, 'reason', 123);
    const denyForMs = optionalInteger(p, 'denyForMs', 0, MAX_DENY_FOR_MS);
    const closed = await gateway.revokeUser(user, {
      ...(reason === undefined ? {} : { reason }),
      ...(denyForMs === undefined ? {} : { denyForMs }),
    });
    return { closedHere: closed };
  });

  registry.method('disconnectSession', async (params) => {
    const p = named(params, 'disconnectSession', ['sessionId', 'reason']);
    const reason = optionalText(p, 'reason', 123);
    const found = await gateway.revokeSession(
      text(p, 'sessionId'),
      reason === undefined ? {} : { reason },
    );
    return { found };
  });

  registry.method('callClient', async (params, ctx) => {
    const p = named(params, 'callClient', ['sessionId', 'user', 'method', 'params', 'timeoutMs']);
    if ((p['sessionId'] === undefined) === (p['user'] === undefined)) {
      throw invalid('sessionId', 'given, or user, not both');
    }
    const method = clientMethod(p);
    const args = passedParams(p) as Params | undefined;
    const timeoutMs =
      optionalInteger(p, 'timeoutMs', 1, config.maxCallTimeoutMs) ?? config.callTimeoutMs;
    if (p['sessionId'] !== undefined) {
      const answer = await nodes.callSession(
        text(p, 'sessionId'),
        method,
        args,
        timeoutMs,
        callerKey(ctx.session),
      );
      if ('error' in answer)
        throw new JsonRpcError(answer.error.code, answer.error.message, answer.error.data);
      return { result: answer.result };
    }
    return {
      results: await nodes.callUser(
        text(p, 'user'),
        method,
        args,
        timeoutMs,
        callerKey(ctx.session),
      ),
    };
  });

  registry.method('subscribers', async (params, ctx) => {
    const p = named(params, 'subscribers', ['topic']);
    return nodes.countSubscribers(topicName(p), callerKey(ctx.session));
  });

  // Who is subscribed, for a topic declared with presence: a page of members on every node.
  registry.method('members', async (params, ctx) => {
    const p = named(params, 'members', ['topic', 'cursor', 'limit']);
    const topic = topicName(p);
    const cursor = optionalText(p, 'cursor', 1024);
    const limit = optionalInteger(p, 'limit', 1, 1_000);
    let handle;
    try {
      handle = gateway.presence(topic);
    } catch {
      throw new JsonRpcError(ErrorCode.InvalidParams, 'This topic keeps no presence', {
        field: 'topic',
        topic,
      });
    }
    const release = await turnOf(memberReads, ctx.signal);
    try {
      const [count, page] = await Promise.all([
        handle.count(),
        handle.members({
          ...(cursor !== undefined ? { cursor } : {}),
          ...(limit !== undefined ? { limit } : {}),
        }),
      ]);
      return { count, ...page };
    } catch (err) {
      // A cursor no page returned (NATS pages by sequence number): the caller's, not the broker's.
      if (err instanceof RangeError) {
        throw new JsonRpcError(ErrorCode.InvalidParams, err.message, { field: 'cursor' });
      }
      deps.logger.warn({ err, topic }, 'server API: presence read failed');
      throw new ServerError(ErrorCode.BrokerUnavailable, 'Broker unavailable: members not read', {
        topic,
      });
    } finally {
      release();
    }
  });

  registry.method('history', async (params, ctx) => {
    const p = named(params, 'history', ['topic', 'since', 'limit']);
    const topic = topicName(p);
    const since = optionalInteger(p, 'since', 0, Number.MAX_SAFE_INTEGER) ?? 0;
    const limit = optionalInteger(p, 'limit', 1, config.maxHistoryLimit) ?? config.maxHistoryLimit;
    // Through the node's reads, as a client's `history` call and resume replays: at most
    // `limits.maxHistoryReads` at the broker at once (a batch of calls included), identical
    // reads made together shared; the call's end gives up a read not yet sent.
    const reading = new NodeReading(gateway.pubsub.historyReads);
    const stop = (): void => reading.stop();
    ctx.signal?.addEventListener('abort', stop, { once: true });
    try {
      return await readApiHistoryPage(reading, topic, since, limit, config.maxHistoryBytes);
    } catch (err) {
      deps.logger.warn({ err, topic }, 'server API: history read failed');
      throw new ServerError(ErrorCode.BrokerUnavailable, 'Broker unavailable: history not read', {
        topic,
      });
    } finally {
      ctx.signal?.removeEventListener('abort', stop);
    }
  });

  return registry;
}

/**
 * A slot of `slots` once it is this call's turn; the call's end (`signal`) while it waits gives
 * up the turn and rejects with the signal's reason.
 */
function turnOf(slots: Slots, signal: AbortSignal | undefined): Promise<() => void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = (): void => {
      leave();
      reject(signal!.reason as Error);
    };
    const leave = slots.take((release) => {
      signal?.removeEventListener('abort', onAbort);
      resolve(release);
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

import { Observable } from 'rxjs';
import type { Subscription } from 'rxjs';
import { bindMethods } from '../contract/bind.js';
import type { MethodsApi } from '../contract/bind.js';
import type {
  Contract,
  HandlerParams,
  HandlerResult,
  MethodSpec,
  SubscriptionData,
  SubscriptionParams,
} from '../contract/contract.js';
import { findHandler, strayHandlers } from '../contract/nested.js';
import type { NestedHandlers } from '../contract/nested.js';
import { specOfTopic } from '../contract/topic-names.js';
import type { SpecOfTopic, TopicNames } from '../contract/topic-names.js';
import { andThen, paramsValidator, validateMessage } from '../contract/validate.js';
import type { HandlerContext } from '../peer/handler-context.js';
import { silentLogger } from '../peer/logger.js';
import type { Logger } from '../peer/logger.js';
import { isRecord, refuse } from '../peer/option-rules.js';
import { InternalError, JsonRpcError } from '../protocol/errors.js';
import type { Params } from '../protocol/types.js';
import type { RpcClient } from './client.js';

type SubscriptionsOf<K extends Contract> = NonNullable<K['subscriptions']>;
type NotificationsOf<K extends Contract> = NonNullable<K['notifications']>;
type ClientMethodsOf<K extends Contract> = NonNullable<K['clientMethods']>;

/** A handler per method the contract says the client implements, by full name. */
export type ClientMethodHandlers<K extends Contract> = {
  [M in keyof ClientMethodsOf<K>]: (
    params: HandlerParams<ClientMethodsOf<K>[M]>,
    ctx: HandlerContext<RpcClient>,
  ) => HandlerResult<ClientMethodsOf<K>[M]> | Promise<HandlerResult<ClientMethodsOf<K>[M]>>;
};

/**
 * Handlers for the methods the contract says the client implements: by full name
 * (`'client.confirm': f`) or nested by the dotted name's segments (`client: { confirm: f }`).
 */
export type ClientImplementation<K extends Contract> = NestedHandlers<ClientMethodHandlers<K>>;

export interface UseContractOptions {
  /** Where a notification that does not match the contract is reported (it is dropped). Default: silent. */
  logger?: Logger;
}

/** A client bound to a contract: every call, subscription and notification typed by it. */
export interface ContractClient<K extends Contract> {
  /**
   * `api.subtract({ minuend: 42, subtrahend: 23 })`: wrong params are compile errors. A dotted
   * name is also nested: `api.chat.send(...)` is `api['chat.send'](...)`.
   */
  readonly api: MethodsApi<K['methods']>;
  /**
   * Params may be left out only when the subscription takes none (or all are optional).
   * A wildcard topic (`room.*`) is subscribed under any of its names (`room.lobby`).
   * Each message is parsed with the `data` schema (defaults applied): one that does not
   * match errors the Observable with a local -32603 (`data: { subscription, issues }`).
   */
  readonly subscribe: <N extends TopicNames<SubscriptionsOf<K>>>(
    name: N,
    ...params: undefined extends SubscriptionParams<SpecOfTopic<SubscriptionsOf<K>, N>>
      ? [params?: SubscriptionParams<SpecOfTopic<SubscriptionsOf<K>, N>>]
      : [params: SubscriptionParams<SpecOfTopic<SubscriptionsOf<K>, N>>]
  ) => Observable<SubscriptionData<SpecOfTopic<SubscriptionsOf<K>, N>>>;
  /**
   * Each notification's params are mapped onto names (paramOrder) and parsed with the
   * schema; one that does not match is dropped, with a warning on `options.logger`.
   */
  readonly notifications: <N extends keyof NotificationsOf<K> & string>(
    name: N,
  ) => Observable<HandlerParams<NotificationsOf<K>[N]>>;
}

/**
 * Values that may wait behind an async parse, at most, per Observable: a server sending faster
 * than an async schema parses (one that awaits I/O) cannot make the client hold its messages
 * without bound. One more is dropped or ends the stream (`parseEach`'s `overflow`).
 */
export const MAX_PARSE_BACKLOG = 1_000;

/**
 * Each value through `parse` (sync or async), emitted in arrival order; a sync parse emits at
 * once. A parse that throws or rejects ends the stream with its error, unless `drop` takes it
 * (returns true). A value that finds MAX_PARSE_BACKLOG waiting is given to `overflow`: dropped
 * when it returns nothing, else the source is let go and the stream ends with that error once
 * the values waiting are emitted. Written out rather than with concatMap: concatMap's `from`
 * brings rxjs's iterable and async-iterable support, and tslib, into the browser bundle (about
 * 3 KiB).
 */
function parseEach<T>(
  source: Observable<T>,
  parse: (value: T) => unknown,
  drop: (err: unknown) => boolean,
  overflow: () => Error | undefined,
): Observable<unknown> {
  return new Observable<unknown>((subscriber) => {
    const fail = (err: unknown): void => {
      if (!drop(err)) subscriber.error(err);
    };
    /** Parse and emit one value; a promise while an async parse is pending. */
    const step = (value: T): Promise<void> | undefined => {
      if (subscriber.closed) return undefined;
      let parsed: unknown;
      try {
        parsed = parse(value);
      } catch (err) {
        fail(err);
        return undefined;
      }
      if (!(parsed instanceof Promise)) {
        subscriber.next(parsed);
        return undefined;
      }
      return parsed.then((valid: unknown) => {
        if (!subscriber.closed) subscriber.next(valid);
      }, fail);
    };
    let pending = 0;
    let tail: Promise<void> = Promise.resolve();
    let sourceDone = false;
    /** Let go after an overflow: what the source still sends is not read. */
    let letGo = false;
    const settled = (): void => {
      pending--;
      if (sourceDone && pending === 0) subscriber.complete();
    };
    let subscription: Subscription | undefined = undefined;
    subscription = source.subscribe({
      next: (value) => {
        if (letGo) return;
        if (pending === 0) {
          const running = step(value);
          if (!running) return;
          pending++;
          tail = running.then(settled);
          return;
        }
        // The one parsing, and MAX_PARSE_BACKLOG behind it.
        if (pending > MAX_PARSE_BACKLOG) {
          const err = overflow();
          if (!err) return;
          letGo = true;
          subscription?.unsubscribe();
          tail = tail.then(() => subscriber.error(err));
          return;
        }
        // Behind an async parse: wait for it, so messages keep their order.
        pending++;
        tail = tail.then(() => step(value)).then(settled);
      },
      // Behind the messages still being parsed, so none of them is lost to it.
      error: (err: unknown) => {
        if (pending === 0) subscriber.error(err);
        else tail = tail.then(() => subscriber.error(err));
      },
      complete: () => {
        sourceDone = true;
        if (pending === 0) subscriber.complete();
      },
    });
    // Let go while subscribing (a source that emits at once): not kept.
    if (letGo) subscription.unsubscribe();
    return () => subscription.unsubscribe();
  });
}

/**
 * Bind a client to a contract, and register its side of it: the server's calls
 * to the client's methods are validated against the contract (-32602) before
 * the handler runs; subscription messages and notifications are parsed with
 * their schemas before they are delivered.
 */
export function useContract<K extends Contract>(
  client: RpcClient,
  contract: K,
  clientMethods?: ClientImplementation<K>,
  options: UseContractOptions = {},
): ContractClient<K> {
  const logger = options.logger ?? silentLogger;
  const specs = contract.clientMethods ?? {};
  if (clientMethods !== undefined && !isRecord(clientMethods)) {
    refuse('clientMethods', 'an object of handlers', clientMethods);
  }
  const handlers = clientMethods ?? {};
  const [stray] = strayHandlers(handlers, Object.keys(specs));
  if (stray !== undefined) throw new Error(`"${stray}" is not a client method of the contract`);
  // Every handler found (a name given twice throws) before any is registered.
  const found = Object.entries(specs).map(
    ([name, spec]) =>
      [name, spec, findHandler(handlers, name)] as [
        string,
        MethodSpec,
        ((params: unknown, ctx: HandlerContext<RpcClient>) => unknown) | undefined,
      ],
  );
  for (const [name, , handler] of found) {
    if (handler) continue;
    const given = Object.hasOwn(handlers, name)
      ? (handlers as Record<string, unknown>)[name]
      : undefined;
    // Given, but as something that cannot be called: the server's calls to it would each be
    // answered -32601 while the code reads as if it were registered.
    if (given !== undefined && !isRecord(given))
      refuse(`clientMethods["${name}"]`, 'a function', given);
  }
  for (const [name, spec, handler] of found) {
    if (!handler) continue;
    const validate = paramsValidator(spec);
    client.method(name, (params: Params | undefined, ctx) =>
      andThen(validate(params), (valid) => handler(valid, ctx)),
    );
  }
  const notificationSpecs = (contract.notifications ?? {}) as Record<string, MethodSpec>;
  const subscriptionSpecs = contract.subscriptions ?? {};
  const notifications = (name: string): Observable<unknown> => {
    const spec = notificationSpecs[name];
    if (!spec) return client.notificationsOf(name);
    const validate = paramsValidator(spec);
    // Not matching the contract is the server's bug: the notification is dropped, and said so.
    const dropped = (err: unknown): boolean => {
      if (!(err instanceof JsonRpcError)) return false;
      const issues = (err.data as { issues?: unknown } | undefined)?.issues;
      logger.warn(
        { notification: name, issues },
        'notification does not match the contract: dropped',
      );
      return true;
    };
    // Past the backlog, dropped as well: a notification has no stream to end.
    const overflow = (): undefined => {
      logger.warn(
        { notification: name, limit: MAX_PARSE_BACKLOG },
        'notification dropped: too many waiting for its schema',
      );
      return undefined;
    };
    return parseEach(client.notificationsOf(name), (params) => validate(params), dropped, overflow);
  };
  const subscribe = (name: string, params: unknown): Observable<unknown> => {
    const schema = specOfTopic(subscriptionSpecs, name)?.data;
    const messages = client.subscribe(name, params);
    if (!schema) return messages;
    // A message past the backlog ends the subscription (after those waiting): every message,
    // or a word about the ones missed.
    const overflow = (): Error =>
      new InternalError('Subscription messages come faster than its data schema parses them', {
        subscription: name,
        limit: MAX_PARSE_BACKLOG,
      });
    return parseEach(
      messages,
      (data) => validateMessage(schema, name, data),
      () => false,
      overflow,
    );
  };
  return {
    api: bindMethods<K['methods']>(client, contract.methods),
    subscribe: (name, ...params) => subscribe(name, params[0]) as never,
    notifications: (name) => notifications(name) as never,
  };
}

import type { Observable } from 'rxjs';
import { bindMethods } from '../contract/bind.js';
import type { MethodsApi } from '../contract/bind.js';
import { assertContract } from '../contract/contract.js';
import type {
  CallParams,
  Contract,
  HandlerParams,
  HandlerResult,
  MethodSpec,
  PublishData,
} from '../contract/contract.js';
import { toOpenRpc } from '../contract/openrpc.js';
import type { OpenRpcDocument } from '../contract/openrpc.js';
import { findHandler } from '../contract/nested.js';
import type { NestedHandlers } from '../contract/nested.js';
import { findNonJson } from '../contract/json-value.js';
import { specOfTopic } from '../contract/topic-names.js';
import type { SpecOfTopic, StreamKeys, TopicNames } from '../contract/topic-names.js';
import {
  andThen,
  normalizeParams,
  paramsValidator,
  parseWith,
  validateResult,
} from '../contract/validate.js';
import type { ValidationIssues } from '../contract/validate.js';
import type { HandlerContext } from '../peer/handler-context.js';
import type { Logger } from '../peer/logger.js';
import { InternalError } from '../protocol/errors.js';
import type { Params } from '../protocol/types.js';
import { checkMethodName } from '../peer/method-registry.js';
import { isRecord, refuse } from '../peer/option-rules.js';
import { performance as nodePerformance } from 'node:perf_hooks';
import type { Gateway } from './gateway.js';
import type { StreamHandler, TopicOptions } from './pubsub-service.js';
import type { PublishOptions } from './pubsub-types.js';
import type { Session } from './session.js';

type Ctx<C> = HandlerContext<Session<C>>;
type MethodsOf<K extends Contract> = K['methods'];
type SubscriptionsOf<K extends Contract> = NonNullable<K['subscriptions']>;
type ClientMethodsOf<K extends Contract> = NonNullable<K['clientMethods']>;
type NotificationsOf<K extends Contract> = NonNullable<K['notifications']>;

/** A handler per method of the contract, by full name. */
export type MethodHandlers<K extends Contract, C> = {
  [M in keyof MethodsOf<K>]: (
    params: HandlerParams<MethodsOf<K>[M]>,
    ctx: Ctx<C>,
  ) => HandlerResult<MethodsOf<K>[M]> | Promise<HandlerResult<MethodsOf<K>[M]>>;
};

/** The server's side of a contract: a handler per method, and a source per stream. */
export interface ContractImplementation<K extends Contract, C> {
  /**
   * A handler per method, by full name (`'chat.send': f`) or nested by the dotted name's
   * segments (`chat: { send: f }`), so a composed contract's handlers can be the parts'.
   */
  methods: NestedHandlers<MethodHandlers<K, C>>;
  /** Options (authorize, slow-consumer policy) for the contract's topics. */
  topics?: { [S in keyof SubscriptionsOf<K>]?: TopicOptions<C> };
  /**
   * Per-subscriber streams by subscription name (an exact one: `room.*` can only be a topic).
   * A subscription of the contract without a stream here is a topic (publish to it with
   * `contractEvents(...).publish`).
   */
  streams?: {
    [S in StreamKeys<SubscriptionsOf<K>>]?: StreamSource<
      HandlerParams<SubscriptionsOf<K>[S]>,
      PublishData<SubscriptionsOf<K>[S]>,
      C
    >;
  };
}

/**
 * A stream's messages for one subscriber: an Observable (or a promise of one), or an async
 * iterable such as an `async function*` handler's generator, read until it returns (the
 * subscription then completes) or the subscriber leaves; `ctx.signal` aborts when the stream ends
 * (see StreamHandler). Items are the data schema's input: what is sent, and parsed by the client.
 */
export type StreamSource<P, T, C> = (
  params: P,
  ctx: Ctx<C>,
) => Observable<T> | AsyncIterable<T> | Promise<Observable<T> | AsyncIterable<T>>;

export interface ImplementOptions {
  /**
   * Debug mode: also check every result against the contract (a mismatch answers -32603),
   * and, given to `contractEvents`, every notification and published message; then check
   * that it is JSON as it stands (no Date, bigint, Map, ...: -32603 naming the path, and
   * logged). What goes out is still what the handler returned, not the schema's output.
   * Default false; pass `process.env.NODE_ENV !== 'production'` to check in development only.
   */
  validateResults?: boolean;
}

/**
 * Debug mode: throw -32603 (and log it) when `value` would not arrive as it was sent,
 * naming the path: `{ method: "getUser", path: ["createdAt"], found: "a Date (...)" }`.
 */
function assertJson(
  value: unknown,
  what: 'Result' | 'Notification' | 'Published data',
  about: Record<string, string>,
  logger: Logger,
): void {
  const problem = findNonJson(value);
  if (!problem) return;
  const data = { ...about, ...problem };
  logger.error(data, `${what} is not JSON: not sent`);
  throw new InternalError(`${what} is not JSON`, data);
}

/**
 * Bytes of the input budget (limits.bytesPerSecond, bytesPerSecondPerIp) that one millisecond
 * of params validation costs: what the gateway reads of ordinary requests in a millisecond of
 * its thread (80 to 110 ns a byte, docs/performance.md), so a millisecond spent validating a
 * connection's params costs it what a millisecond spent reading its requests does. A schema's
 * work does not follow the params' bytes: a union tries each option on every item, and folds
 * thousands of failures into one issue.
 */
export const VALIDATION_BYTES_PER_MS = 10_000;

/** Charge the connection for `ms` of validation, at VALIDATION_BYTES_PER_MS. */
function charge(transport: { chargeBytes?(bytes: number): void }, ms: number): void {
  const bytes = Math.ceil(ms * VALIDATION_BYTES_PER_MS);
  if (bytes > 0) transport.chargeBytes?.(bytes);
}

/**
 * `validate` whose time, passing or failing, costs the caller's input budget: its synchronous
 * time, and for an async schema the time the thread was busy until it settled (an event-loop
 * utilization reading): the thread's, not the validation's alone (no finer measure exists), and
 * nothing for the time it only waited, so a schema that awaits a database costs what its own
 * work does.
 */
function charging<C>(
  validate: (params: Params | undefined) => unknown,
): (params: Params | undefined, ctx: Ctx<C>) => unknown {
  return (params, ctx) => {
    const transport = ctx.session.transport;
    const start = nodePerformance.now();
    let valid: unknown;
    try {
      valid = validate(params);
    } finally {
      charge(transport, nodePerformance.now() - start);
    }
    // A closure only for an async schema: a plain one's way makes nothing per call.
    if (valid instanceof Promise) {
      const loop = nodePerformance.eventLoopUtilization();
      return valid.finally(() =>
        charge(transport, nodePerformance.eventLoopUtilization(loop).active),
      );
    }
    return valid;
  };
}

/**
 * Serve a contract on a gateway: every method's params are validated (-32602
 * with the issues), positional params are mapped to names where the contract
 * says so, streams and topics are declared, and `rpc.discover` and
 * `GET /openrpc.json` serve the OpenRPC document.
 */
export function implementContract<K extends Contract, C>(
  gateway: Gateway<C>,
  contract: K,
  implementation: ContractImplementation<K, C>,
  options: ImplementOptions = {},
): OpenRpcDocument {
  assertContract(contract);
  if (!isRecord(implementation)) refuse('implementation', 'an object', implementation);
  if (!isRecord(implementation.methods)) {
    refuse('implementation.methods', 'an object of handlers', implementation.methods);
  }
  if (options !== undefined && !isRecord(options)) refuse('options', 'an object', options);
  // Every handler found before any is registered: a missing one leaves the gateway as it was.
  const handlers = Object.entries(contract.methods).map(([name, spec]) => {
    const handler = findHandler(implementation.methods, name) as
      ((params: unknown, ctx: Ctx<C>) => unknown) | undefined;
    if (!handler) {
      const methods = implementation.methods as Record<string, unknown>;
      const given = Object.hasOwn(methods, name) ? methods[name] : undefined;
      // Given, but as something that cannot be called: said as such, not as missing.
      if (given !== undefined && !isRecord(given)) {
        refuse(`implementation.methods["${name}"]`, 'a function', given);
      }
      throw new Error(`The contract's method "${name}" has no handler`);
    }
    checkMethodName(name);
    if (gateway.registry.has(name)) throw new Error(`Method "${name}" is already registered`);
    return [name, spec, handler] as const;
  });
  const subscriptions = contract.subscriptions ?? {};
  const streams = checkedEntries(implementation.streams, 'streams', subscriptions);
  const topics = checkedEntries(implementation.topics, 'topics', subscriptions);
  for (const [name, stream] of Object.entries(streams)) {
    if (stream === undefined) continue;
    if (topics[name] !== undefined) {
      // A stream takes no topic options: they would be dropped without a word.
      throw new Error(`"${name}" has a stream and topic options: a name is a stream or a topic`);
    }
  }
  // Checked as gateway.topic and gateway.stream check them, names already declared included,
  // before anything is registered: a refusal leaves the gateway as it was.
  for (const name of Object.keys(subscriptions)) {
    gateway.checkDeclaration(
      name,
      topics[name] as TopicOptions<C> | undefined,
      streams[name] as StreamHandler<C, unknown, unknown> | undefined,
    );
  }
  for (const [name, spec, handler] of handlers) {
    const validate = charging<C>(paramsValidator(spec));
    // Stays synchronous when the schemas and the handler are, as a plain method would be.
    gateway.method(name, (params: Params | undefined, ctx) =>
      andThen(validate(params, ctx), (valid) => {
        const result = handler(valid, ctx);
        if (!options.validateResults) return result;
        // Checked, but sent as returned: the caller parses it with the same schema, and the
        // schema's output (a transform's, say) need not be valid input to it. A value the
        // schema accepts may still not be JSON (z.any(), or a schema the types were cast past).
        return andThen(result, (value) =>
          andThen(validateResult(spec, name, value), () => {
            assertJson(value, 'Result', { method: name }, ctx.logger);
            return value;
          }),
        );
      }),
    );
  }
  for (const [name, spec] of Object.entries(subscriptions)) {
    const stream = streams[name] as StreamSource<unknown, unknown, C> | undefined;
    if (!stream) {
      gateway.topic(name, topics[name] as TopicOptions<C> | undefined);
      continue;
    }
    // Params documented as one member named "params" are accepted in that form, as for methods.
    const validate = charging<C>(paramsValidator(spec as MethodSpec));
    gateway.stream(name, (params, ctx) =>
      andThen(validate(params as Params | undefined, ctx), (valid) => stream(valid, ctx)),
    );
  }
  const document = toOpenRpc(contract, gateway.pubsub.methods);
  gateway.serveDiscovery(document);
  return document;
}

/**
 * `implementation.streams` or `.topics`: undefined or an object, keyed by the contract's
 * subscriptions only (a key the contract lacks, say a misspelt one, would leave its intended
 * subscription a plain topic without a word); streams are functions.
 */
function checkedEntries(
  value: unknown,
  what: 'streams' | 'topics',
  subscriptions: Record<string, unknown>,
): Record<string, unknown> {
  if (value === undefined) return {};
  const path = `implementation.${what}`;
  if (!isRecord(value)) refuse(path, 'an object', value);
  for (const [name, entry] of Object.entries(value)) {
    if (!Object.hasOwn(subscriptions, name)) {
      throw new Error(`"${name}" in ${path} is not a subscription of the contract`);
    }
    if (what === 'streams' && entry !== undefined && typeof entry !== 'function') {
      refuse(`${path}["${name}"]`, 'a function', entry);
    }
  }
  return value;
}

/** Arguments after the name: params may be left out when the schema allows `undefined`. */
type ParamsArg<P> = undefined extends P ? [params?: P] : [params: P];

/** What notifications can be sent through: a Session. */
export interface Notifiable {
  notify(method: string, params?: Params): void;
}

/** What the server sends, typed (and in debug mode checked) by the contract. */
export interface ContractEvents<K extends Contract> {
  /**
   * Send one of the contract's notifications to a session, params as the schema's input
   * (by position too, with paramOrder). In debug mode a mismatch throws -32603; with an
   * async schema the notification is sent once checked, and a mismatch is logged and dropped.
   */
  readonly notify: <N extends keyof NotificationsOf<K> & string>(
    session: Notifiable,
    name: N,
    ...params: ParamsArg<CallParams<NotificationsOf<K>[N]>>
  ) => void;
  /**
   * `gateway.notifyUser` for one of the contract's notifications: every session of `user`,
   * on every gateway sharing the broker (through the user's inbox when `userInbox` is on).
   * Resolves as `gateway.notifyUser` does; in debug mode a mismatch rejects with -32603 and
   * nothing is sent.
   */
  readonly notifyUser: <N extends keyof NotificationsOf<K> & string>(
    user: string,
    name: N,
    ...params: ParamsArg<CallParams<NotificationsOf<K>[N]>>
  ) => Promise<number | undefined>;
  /**
   * Publish to one of the contract's topics, data as the schema's input; a wildcard topic
   * (`room.*`) under any of its names (`room.lobby`); `options.except` as `gateway.publish`. Resolves with the sequence number; in
   * debug mode a mismatch rejects with -32603 and nothing is published.
   */
  readonly publish: <T extends TopicNames<SubscriptionsOf<K>>>(
    topic: T,
    data: PublishData<SpecOfTopic<SubscriptionsOf<K>, T>>,
    options?: PublishOptions,
  ) => Promise<number>;
}

/**
 * Typed `notify`, `notifyUser` and `publish` for a contract's notifications and topics: a
 * wrong name or payload is a compile error, and with `validateResults` (debug mode) a runtime
 * error too. Create it before `implementContract` when the handlers use it.
 */
export function contractEvents<K extends Contract, C>(
  gateway: Gateway<C>,
  contract: K,
  options: ImplementOptions = {},
): ContractEvents<K> {
  const notifications = (contract.notifications ?? {}) as Record<string, MethodSpec | undefined>;
  const subscriptions = contract.subscriptions ?? {};
  const mismatch = (what: string, about: Record<string, string>) => (issues: ValidationIssues) =>
    new InternalError(`${what} does not match the contract`, { ...about, ...issues });
  /**
   * Debug mode: params checked as the client will read them (positional params mapped to
   * names), then as JSON; throws or rejects -32603. They are sent as given.
   */
  const checkNotification = (name: string, params: Params | undefined): unknown => {
    if (!options.validateResults) return undefined;
    const spec = notifications[name];
    const about = { notification: name };
    const json = () => assertJson(params, 'Notification', about, gateway.logger);
    if (!spec?.params) return json();
    const fail = mismatch('Notification', about);
    return andThen(parseWith(spec.params, normalizeParams(spec, params), fail), json);
  };
  const events = {
    notify: (session: Notifiable, name: string, params?: Params) => {
      const send = () => session.notify(name, params);
      const checked = checkNotification(name, params);
      if (!(checked instanceof Promise)) return send();
      // The session may close while an async schema runs: then send throws, logged too.
      checked
        .then(send)
        .catch((err: unknown) =>
          gateway.logger.error({ err, notification: name }, 'notification not sent'),
        );
    },
    notifyUser: async (user: string, name: string, params?: Params) => {
      await checkNotification(name, params);
      return gateway.notifyUser(user, name, params);
    },
    publish: async (topic: string, data: unknown, publishOptions?: PublishOptions) => {
      if (options.validateResults) {
        const schema = specOfTopic(subscriptions, topic)?.data;
        if (schema) await parseWith(schema, data, mismatch('Published data', { topic }));
        assertJson(data, 'Published data', { topic }, gateway.logger);
      }
      return gateway.publish(topic, data, publishOptions);
    },
  };
  return events as ContractEvents<K>;
}

/** The client's methods of a contract, typed, for calling from the server: `clientApi(session, contract).confirm(...)`. */
export function clientApi<K extends Contract>(
  session: Session<unknown> | { call: Session<unknown>['call'] },
  contract: K,
): MethodsApi<ClientMethodsOf<K>> {
  return bindMethods(session, (contract.clientMethods ?? {}) as ClientMethodsOf<K>);
}

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
  SubscriptionData,
} from '../contract/contract.js';
import { toOpenRpc } from '../contract/openrpc.js';
import type { OpenRpcDocument } from '../contract/openrpc.js';
import {
  andThen,
  normalizeParams,
  paramsValidator,
  parseWith,
  validateResult,
} from '../contract/validate.js';
import type { ValidationIssues } from '../contract/validate.js';
import type { HandlerContext } from '../peer/handler-context.js';
import { InternalError } from '../protocol/errors.js';
import type { Params } from '../protocol/types.js';
import type { Gateway } from './gateway.js';
import type { TopicOptions } from './pubsub-service.js';
import type { Session } from './session.js';

type Ctx<C> = HandlerContext<Session<C>>;
type MethodsOf<K extends Contract> = K['methods'];
type SubscriptionsOf<K extends Contract> = NonNullable<K['subscriptions']>;
type ClientMethodsOf<K extends Contract> = NonNullable<K['clientMethods']>;
type NotificationsOf<K extends Contract> = NonNullable<K['notifications']>;

/** The server's side of a contract: a handler per method, and a source per stream. */
export interface ContractImplementation<K extends Contract, C> {
  methods: {
    [M in keyof MethodsOf<K>]: (
      params: HandlerParams<MethodsOf<K>[M]>,
      ctx: Ctx<C>,
    ) => HandlerResult<MethodsOf<K>[M]> | Promise<HandlerResult<MethodsOf<K>[M]>>;
  };
  /** Options (authorize, slow-consumer policy) for the contract's topics. */
  topics?: { [S in keyof SubscriptionsOf<K>]?: TopicOptions<C> };
  /**
   * Per-subscriber streams by subscription name. A subscription of the contract
   * without a stream here is a topic (publish to it with `contractEvents(...).publish`).
   */
  streams?: {
    [S in keyof SubscriptionsOf<K>]?: (
      params: HandlerParams<SubscriptionsOf<K>[S]>,
      ctx: Ctx<C>,
    ) => Observable<SubscriptionData<SubscriptionsOf<K>[S]>>;
  };
}

export interface ImplementOptions {
  /**
   * Debug mode: also check every result against the contract (a mismatch answers -32603),
   * and, given to `contractEvents`, every notification and published message. What goes
   * out is still what the handler returned, not the schema's output. Default false.
   */
  validateResults?: boolean;
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
  const handlers = implementation.methods as Record<
    string,
    (params: unknown, ctx: Ctx<C>) => unknown
  >;
  for (const [name, spec] of Object.entries(contract.methods)) {
    const handler = handlers[name];
    if (!handler) throw new Error(`The contract's method "${name}" has no handler`);
    const validate = paramsValidator(spec);
    // Stays synchronous when the schemas and the handler are, as a plain method would be.
    gateway.method(name, (params: Params | undefined, ctx) =>
      andThen(validate(params), (valid) => {
        const result = handler(valid, ctx);
        if (!options.validateResults) return result;
        // Checked, but sent as returned: the caller parses it with the same schema, and the
        // schema's output (a transform's, say) need not be valid input to it.
        return andThen(result, (value) => andThen(validateResult(spec, name, value), () => value));
      }),
    );
  }
  const streams = (implementation.streams ?? {}) as Record<
    string,
    ((params: unknown, ctx: Ctx<C>) => Observable<unknown>) | undefined
  >;
  for (const [name, spec] of Object.entries(contract.subscriptions ?? {})) {
    const stream = streams[name];
    if (!stream) {
      gateway.topic(
        name,
        (implementation.topics as Record<string, TopicOptions<C>> | undefined)?.[name],
      );
      continue;
    }
    // Params documented as one member named "params" are accepted in that form, as for methods.
    const validate = paramsValidator(spec as MethodSpec);
    gateway.stream(name, (params, ctx) =>
      andThen(validate(params as Params | undefined), (valid) => stream(valid, ctx)),
    );
  }
  const document = toOpenRpc(contract, gateway.pubsub.methods);
  gateway.serveDiscovery(document);
  return document;
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
   * Publish to one of the contract's topics, data as the schema's input. Resolves with the
   * sequence number; in debug mode a mismatch rejects with -32603 and nothing is published.
   */
  readonly publish: <T extends keyof SubscriptionsOf<K> & string>(
    topic: T,
    data: PublishData<SubscriptionsOf<K>[T]>,
  ) => Promise<number>;
}

/**
 * Typed `notify` and `publish` for a contract's notifications and topics: a wrong name or
 * payload is a compile error, and with `validateResults` (debug mode) a runtime error too.
 * Create it before `implementContract` when the handlers use it.
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
  const events = {
    notify: (session: Notifiable, name: string, params?: Params) => {
      const spec = notifications[name];
      const send = () => session.notify(name, params);
      if (!options.validateResults || !spec?.params) return send();
      // Checked as the client will read it (positional params mapped to names); sent as given.
      const checked = parseWith(
        spec.params,
        normalizeParams(spec, params),
        mismatch('Notification', { notification: name }),
      );
      if (!(checked instanceof Promise)) return send();
      // The session may close while an async schema runs: then send throws, logged too.
      checked
        .then(send)
        .catch((err: unknown) =>
          gateway.logger.error({ err, notification: name }, 'notification not sent'),
        );
    },
    publish: async (topic: string, data: unknown) => {
      const schema = subscriptions[topic]?.data;
      if (options.validateResults && schema) {
        await parseWith(schema, data, mismatch('Published data', { topic }));
      }
      return gateway.publish(topic, data);
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

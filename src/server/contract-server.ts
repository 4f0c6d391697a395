import type { Observable } from 'rxjs';
import { bindMethods } from '../contract/bind.js';
import type { MethodsApi } from '../contract/bind.js';
import type {
  Contract,
  HandlerParams,
  HandlerResult,
  MethodSpec,
  SubscriptionData,
} from '../contract/contract.js';
import { paramsShape, toOpenRpc } from '../contract/openrpc.js';
import type { OpenRpcDocument } from '../contract/openrpc.js';
import { andThen, validateParams, validateResult } from '../contract/validate.js';
import type { HandlerContext } from '../peer/handler-context.js';
import type { Params } from '../protocol/types.js';
import type { Gateway } from './gateway.js';
import type { TopicOptions } from './pubsub-service.js';
import type { Session } from './session.js';

type Ctx<C> = HandlerContext<Session<C>>;
type MethodsOf<K extends Contract> = K['methods'];
type SubscriptionsOf<K extends Contract> = NonNullable<K['subscriptions']>;
type ClientMethodsOf<K extends Contract> = NonNullable<K['clientMethods']>;

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
   * without a stream here is a topic (publish to it with `gateway.publish`).
   */
  streams?: {
    [S in keyof SubscriptionsOf<K>]?: (
      params: HandlerParams<SubscriptionsOf<K>[S]>,
      ctx: Ctx<C>,
    ) => Observable<SubscriptionData<SubscriptionsOf<K>[S]>>;
  };
}

export interface ImplementOptions {
  /** Also check every result against the contract (a mismatch answers -32603). Default false. */
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
  const handlers = implementation.methods as Record<
    string,
    (params: unknown, ctx: Ctx<C>) => unknown
  >;
  for (const [name, spec] of Object.entries(contract.methods)) {
    const handler = handlers[name];
    if (!handler) throw new Error(`The contract's method "${name}" has no handler`);
    // The document describes such params as one member named "params": accept that form too.
    const wrapped = paramsShape(spec.params) === 'wrapped';
    // Stays synchronous when the schemas and the handler are, as a plain method would be.
    gateway.method(name, (params: Params | undefined, ctx) =>
      andThen(validateParams(spec, wrapped ? unwrap(params) : params), (valid) => {
        const result = handler(valid, ctx);
        return options.validateResults
          ? andThen(result, (value) => validateResult(spec, name, value))
          : result;
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
    gateway.stream(name, (params, ctx) =>
      andThen(validateParams(spec as MethodSpec, params as Params | undefined), (valid) =>
        stream(valid, ctx),
      ),
    );
  }
  const document = toOpenRpc(contract, gateway.pubsub.methods);
  gateway.serveDiscovery(document);
  return document;
}

/** `{"params": X}` becomes X: how the OpenRPC document tells clients to send non-object params by name. */
function unwrap(params: Params | undefined): Params | undefined {
  if (!params || Array.isArray(params)) return params;
  const keys = Object.keys(params);
  return keys.length === 1 && keys[0] === 'params'
    ? ((params as { params: Params }).params ?? params)
    : params;
}

/** The client's methods of a contract, typed, for calling from the server: `clientApi(session, contract).confirm(...)`. */
export function clientApi<K extends Contract>(
  session: Session<unknown> | { call: Session<unknown>['call'] },
  contract: K,
): MethodsApi<ClientMethodsOf<K>> {
  return bindMethods(session, (contract.clientMethods ?? {}) as ClientMethodsOf<K>);
}

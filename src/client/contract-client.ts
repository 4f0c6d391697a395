import type { Observable } from 'rxjs';
import { bindMethods } from '../contract/bind.js';
import type { MethodsApi } from '../contract/bind.js';
import type {
  Contract,
  HandlerParams,
  HandlerResult,
  SubscriptionData,
  SubscriptionParams,
} from '../contract/contract.js';
import { andThen, validateParams } from '../contract/validate.js';
import type { HandlerContext } from '../peer/handler-context.js';
import type { Params } from '../protocol/types.js';
import type { RpcClient } from './client.js';

type SubscriptionsOf<K extends Contract> = NonNullable<K['subscriptions']>;
type NotificationsOf<K extends Contract> = NonNullable<K['notifications']>;
type ClientMethodsOf<K extends Contract> = NonNullable<K['clientMethods']>;

/** Handlers for the methods the contract says the client implements. */
export type ClientImplementation<K extends Contract> = {
  [M in keyof ClientMethodsOf<K>]: (
    params: HandlerParams<ClientMethodsOf<K>[M]>,
    ctx: HandlerContext<RpcClient>,
  ) => HandlerResult<ClientMethodsOf<K>[M]> | Promise<HandlerResult<ClientMethodsOf<K>[M]>>;
};

/** A client bound to a contract: every call, subscription and notification typed by it. */
export interface ContractClient<K extends Contract> {
  /** `api.subtract({ minuend: 42, subtrahend: 23 })`: wrong params are compile errors. */
  readonly api: MethodsApi<K['methods']>;
  /** Params may be left out only when the subscription takes none (or all are optional). */
  readonly subscribe: <N extends keyof SubscriptionsOf<K> & string>(
    name: N,
    ...params: undefined extends SubscriptionParams<SubscriptionsOf<K>[N]>
      ? [params?: SubscriptionParams<SubscriptionsOf<K>[N]>]
      : [params: SubscriptionParams<SubscriptionsOf<K>[N]>]
  ) => Observable<SubscriptionData<SubscriptionsOf<K>[N]>>;
  readonly notifications: <N extends keyof NotificationsOf<K> & string>(
    name: N,
  ) => Observable<HandlerParams<NotificationsOf<K>[N]>>;
}

/**
 * Bind a client to a contract, and register its side of it: the server's calls
 * to the client's methods are validated against the contract (-32602) before
 * the handler runs.
 */
export function useContract<K extends Contract>(
  client: RpcClient,
  contract: K,
  clientMethods?: ClientImplementation<K>,
): ContractClient<K> {
  const specs = contract.clientMethods ?? {};
  const handlers = (clientMethods ?? {}) as Record<
    string,
    (params: unknown, ctx: HandlerContext<RpcClient>) => unknown
  >;
  for (const [name, handler] of Object.entries(handlers)) {
    const spec = specs[name];
    if (!spec) throw new Error(`"${name}" is not a client method of the contract`);
    client.method(name, (params: Params | undefined, ctx) =>
      andThen(validateParams(spec, params), (valid) => handler(valid, ctx)),
    );
  }
  return {
    api: bindMethods(client, contract.methods),
    subscribe: (name, ...params) => client.subscribe(name, params[0]),
    notifications: (name) => client.notificationsOf(name),
  };
}

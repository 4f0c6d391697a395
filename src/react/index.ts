// wsrpc-gateway/react: React bindings for the client (React 18.3 or 19, an optional peer).
// Browser-safe, as the client is: nothing here may import Node built-ins or `ws`.
export { ClientProvider, useClient } from './client-context.js';
export type { ClientProviderProps } from './client-context.js';
export { useConnectionState } from './use-connection-state.js';
export type { ConnectionSnapshot } from './use-connection-state.js';
export { useCall, useMutation } from './use-call.js';
export type {
  CallSnapshot,
  ParamsArgument,
  UseCallOptions,
  UseCallResult,
  UseMutationResult,
} from './use-call.js';
export { useSubscription } from './use-subscription.js';
export type { UseSubscriptionOptions, UseSubscriptionResult } from './use-subscription.js';
export { createHooks } from './contract-hooks.js';
export type { ContractHooks, MethodHooks } from './contract-hooks.js';
export type { Nested } from '../contract/nested.js';
export type { SubscriptionStatus, SubscriptionStatusState } from '../client/subscription-status.js';

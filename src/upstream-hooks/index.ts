// Gateway mode's hooks: connect, subscribe and lifecycle events decided or heard by an upstream.
export {
  resolveHooksConfig,
  hooksBounds,
  hooksDefaults,
  lifecycleEventTypes,
} from './hooks-config.js';
export type {
  ConnectHookConfig,
  EventsHookConfig,
  HooksConfig,
  LifecycleEventType,
  OnFailure,
  SubscribeHookConfig,
} from './hooks-config.js';
export { upstreamHooks } from './upstream-hooks.js';
export type { UpstreamHooks } from './upstream-hooks.js';
export type { HookIdentity } from './hook-answers.js';
export type { LifecycleEvent } from './event-queue.js';
export type { TopicRequest } from './subscribe-hook.js';

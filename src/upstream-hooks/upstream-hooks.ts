import type { Logger } from '../peer/logger.js';
import type { Gateway } from '../server/gateway.js';
import type { GatewayOptions, IdentityOptions } from '../server/options.js';
import type { Session } from '../server/session.js';
import type { Tracing } from '../tracing/tracing.js';
import type { JsonRpcHttpClient } from '../upstream/json-rpc-http-client.js';
import type { ReplyLimits } from '../upstream/read-reply.js';
import type { HttpUpstreamConfig } from '../upstream/upstreams-config.js';
import { connectHook } from './connect-hook.js';
import { EventQueue } from './event-queue.js';
import type { LifecycleEvent } from './event-queue.js';
import type { HookIdentity } from './hook-answers.js';
import { hookClient } from './hook-call.js';
import { HookMetrics } from './hook-metrics.js';
import type { HooksConfig, LifecycleEventType } from './hooks-config.js';
import { subscribeHook } from './subscribe-hook.js';
import type { TopicRequest } from './subscribe-hook.js';

/** What `upstreamHooks` gives the gateway: options to create it with, then `attach` once it exists. */
export interface UpstreamHooks {
  /** With `hooks.connect`: the gateway's `authenticate` (the session's context is a HookIdentity). */
  readonly authenticate?: GatewayOptions<HookIdentity>['authenticate'];
  /** With `hooks.connect`: the user the hook named. */
  readonly userOf?: (context: HookIdentity) => string | undefined;
  /** With `hooks.connect`: expiry and the topic and method patterns the hook answered. */
  readonly identity?: Pick<IdentityOptions<HookIdentity>, 'expiresAtOf' | 'topicsOf' | 'methodsOf'>;
  /** With `hooks.subscribe`: the `authorize` hook of the topics declared. */
  readonly authorizeTopic?: (request: TopicRequest) => boolean | Promise<boolean>;
  /** Register the metrics on the gateway and report its sessions' events. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any context type
  attach(gateway: Gateway<any>): void;
  /** Send the events still queued (one attempt), stop, close the hooks' upstream connections. */
  close(): Promise<void>;
}

/** The contexts a connect hook made (so the other hooks tell them from a context of another's). */
const hookIdentities = new WeakSet<object>();

/**
 * Hooks to upstreams from the `hooks` section (see docs/gateway-mode.md, "Hooks"): the connect
 * hook as `authenticate` (with `userOf` and the identity hooks from its answer), the subscribe
 * hook as a topic `authorize`, the events hook as a bounded queue fed by what `attach` hears.
 */
export function upstreamHooks(
  config: HooksConfig,
  deps: {
    logger: Logger;
    tracing: Tracing;
    /**
     * How deep and how many values a hook's reply may hold: the gateway's `limits.maxDepth` and
     * `limits.maxJsonValues`, as for what a client sends; their defaults when not given.
     */
    replyLimits?: ReplyLimits;
  },
): UpstreamHooks {
  const metrics = new HookMetrics();
  const logger = deps.logger.child({ component: 'hooks' });
  const clients = new Map<string, JsonRpcHttpClient>();
  const clientOf = (upstream: HttpUpstreamConfig): JsonRpcHttpClient => {
    let client = clients.get(upstream.name);
    if (!client)
      clients.set(upstream.name, (client = hookClient(upstream, metrics, deps.replyLimits)));
    return client;
  };
  const hookDeps = { logger, tracing: deps.tracing, metrics };
  let userOf: ((context: never) => string | undefined) | undefined;

  const hooks: { -readonly [K in keyof UpstreamHooks]: UpstreamHooks[K] } = {
    attach,
    close,
  };

  if (config.connect) {
    const authenticate = connectHook(config.connect, clientOf(config.connect.upstream), hookDeps);
    hooks.authenticate = async (request) => {
      const identity = await authenticate(request);
      hookIdentities.add(identity);
      return identity;
    };
    hooks.userOf = (context) => context.user;
    userOf = hooks.userOf as (context: never) => string | undefined;
    hooks.identity = {
      expiresAtOf: (context) => context.expiresAt,
      topicsOf: (context) => context.topics,
      methodsOf: (context) => context.methods,
    };
  }

  if (config.subscribe) {
    hooks.authorizeTopic = subscribeHook(config.subscribe, clientOf(config.subscribe.upstream), {
      ...hookDeps,
      userOf: () => userOf,
      contextOf: (session) => {
        const context = session.context;
        return typeof context === 'object' && context !== null && hookIdentities.has(context)
          ? (context as HookIdentity).context
          : context;
      },
    });
  }

  const events = config.events;
  const queue = events && new EventQueue(events, clientOf(events.upstream), hookDeps);
  const wanted = new Set<LifecycleEventType>(events?.events ?? []);
  function report(
    type: LifecycleEventType,
    session: Session<unknown>,
    extra: Partial<LifecycleEvent>,
  ): void {
    if (!queue || !wanted.has(type)) return;
    const user =
      userOf && session.context !== undefined ? userOf(session.context as never) : undefined;
    queue.push({
      type,
      sessionId: session.id,
      ...(typeof user === 'string' ? { user } : {}),
      at: Date.now(),
      ...extra,
    });
  }

  let attached = false;
  const subscriptions: { unsubscribe(): void }[] = [];

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any context type
  function attach(gateway: Gateway<any>): void {
    if (attached) throw new Error('upstreamHooks: attach takes one gateway, once');
    attached = true;
    metrics.register(gateway.metrics.registry);
    userOf = gateway.config.auth.userOf as typeof userOf;
    if (!queue) return;
    if (wanted.has('connect')) {
      subscriptions.push(gateway.connected$.subscribe((session) => report('connect', session, {})));
    }
    if (wanted.has('subscribe') || wanted.has('unsubscribe')) reportSubscriptions(gateway);
    if (wanted.has('disconnect')) {
      subscriptions.push(
        gateway.disconnected$.subscribe((session) => {
          void session.closed.then((info) =>
            report('disconnect', session, { code: info.code, reason: info.reason }),
          );
        }),
      );
    }
  }

  /**
   * Every topic subscription of a session announced on connected$ that starts or ends on this
   * node, whoever made or ended it: the client (subscribe, unsubscribe), the server (join,
   * leave) or a refresh that no longer allows it. Those a closing session ends are not told:
   * its disconnect says they are gone.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any context type
  function reportSubscriptions(gateway: Gateway<any>): void {
    const open = new Map<string, Session<unknown>>();
    subscriptions.push(
      gateway.connected$.subscribe((session) => open.set(session.id, session)),
      gateway.disconnected$.subscribe((session) => open.delete(session.id)),
      gateway.events$.subscribe((event) => {
        if (event.type !== 'subscribe' && event.type !== 'unsubscribe') return;
        if (event.node !== gateway.nodeId) return;
        const session = open.get(event.sessionId);
        if (session && !session.isClosed) report(event.type, session, { topic: event.topic });
      }),
    );
  }

  async function close(): Promise<void> {
    for (const subscription of subscriptions.splice(0)) subscription.unsubscribe();
    await queue?.close();
    await Promise.all([...clients.values()].map((client) => client.close()));
  }

  return hooks;
}

import type { Params } from '../protocol/types.js';
import type { HandlerContext } from './handler-context.js';
import type { RunningCall } from './handler-context.js';
import type { Handler } from './method-registry.js';
import { refuse } from './option-rules.js';
import type { Rule } from './option-rules.js';
import { isPromiseLike } from './replies.js';

/*
 * Middleware: a chain of functions around the handlers of incoming calls, notifications and
 * subscribes (Koa style: code before `await next()` runs before the handler, `next()` settles
 * with the handler's outcome). The chain is composed once, when the peer config is resolved;
 * a peer without middleware never reaches this file.
 */

/** What a middleware is running around. */
export type MiddlewareKind = 'call' | 'notification' | 'subscribe';

/** What a middleware sees: the handler's context plus the message itself. */
export interface MiddlewareContext<S> extends HandlerContext<S> {
  /** 'subscribe' for a call of the subscribe method, 'call' for any other request. */
  readonly kind: MiddlewareKind;
  readonly params: Params | undefined;
  /** The topic or stream a subscribe names; undefined for other kinds, or params naming none. */
  readonly topic: string | undefined;
}

/**
 * One link of the chain. `next()` runs the rest of the chain and the handler; it resolves with
 * the result or rejects with the error. What the middleware returns (or throws) is the outcome;
 * `undefined` after calling `next()` stands for next's own outcome, so `await next()` without a
 * `return` passes the result or the error through. Not calling `next()` answers without the
 * handler. Calling it twice rejects the second time.
 */
export type Middleware<S> = (ctx: MiddlewareContext<S>, next: () => Promise<unknown>) => unknown;

/** How the peer learns which calls are subscribes, and the topic they name. */
export interface SubscribeMethod {
  readonly name: string;
  /** The topic or stream name in the params; undefined when they name none (never throws). */
  topicOf(params: Params | undefined): string | undefined;
}

/** The composed chain: run `handler` for `call` through every middleware. */
export type MiddlewareChain<S> = (
  call: RunningCall<S>,
  notification: boolean,
  params: Params | undefined,
  handler: Handler<S>,
) => unknown;

/** The `middleware` option: an array of functions (a TypeError names the first entry that is not). */
export const middlewareRule: Rule = (value, name) => {
  if (!Array.isArray(value)) refuse(name, 'an array of functions', value);
  (value as unknown[]).forEach((entry, index) => {
    if (typeof entry !== 'function') refuse(`${name}[${index}]`, 'a function', entry);
  });
};

/**
 * Compose `list` into one chain, or undefined for none (the peer then calls handlers directly).
 * Throws a TypeError naming the first entry that is not a function.
 */
export function composeMiddleware<S>(
  list: readonly Middleware<S>[] | undefined,
  subscribe?: SubscribeMethod,
): MiddlewareChain<S> | undefined {
  if (list === undefined) return undefined;
  middlewareRule(list, 'middleware');
  if (list.length === 0) return undefined;
  const chain = [...list];
  return (call, notification, params, handler) => {
    let kind: MiddlewareKind = 'call';
    let topic: string | undefined;
    if (notification) kind = 'notification';
    else if (subscribe && call.method === subscribe.name) {
      kind = 'subscribe';
      topic = subscribe.topicOf(params);
    }
    const ctx = new ChainContext(call, kind, params, topic);
    return runFrom(0, chain, ctx, () => handler(params, call));
  };
}

/** Run `chain[index]` with a `next` that runs the rest, then `last`. */
function runFrom<S>(
  index: number,
  chain: readonly Middleware<S>[],
  ctx: MiddlewareContext<S>,
  last: () => unknown,
): unknown {
  if (index === chain.length) return last();
  let downstream: Promise<unknown> | undefined;
  const next = (): Promise<unknown> => {
    if (downstream) {
      return Promise.reject(new Error(`middleware[${index}] called next() more than once`));
    }
    try {
      downstream = Promise.resolve(runFrom(index + 1, chain, ctx, last));
    } catch (err) {
      downstream = Promise.reject(err as Error);
    }
    return downstream;
  };
  const out = chain[index]!(ctx, next);
  if (isPromiseLike(out)) {
    return Promise.resolve(out).then((value) =>
      value === undefined && downstream ? downstream : value,
    );
  }
  return out === undefined && downstream ? downstream : out;
}

/** The context middleware get: the running call's own fields, plus the message's. */
class ChainContext<S> implements MiddlewareContext<S> {
  constructor(
    private readonly call: RunningCall<S>,
    readonly kind: MiddlewareKind,
    readonly params: Params | undefined,
    readonly topic: string | undefined,
  ) {}

  get session(): S {
    return this.call.session;
  }
  get signal(): AbortSignal {
    return this.call.signal;
  }
  get logger(): HandlerContext<S>['logger'] {
    return this.call.logger;
  }
  get id(): HandlerContext<S>['id'] {
    return this.call.id;
  }
  get method(): string {
    return this.call.method;
  }
  get traceparent(): string | undefined {
    return this.call.traceparent;
  }
  get tracestate(): string | undefined {
    return this.call.tracestate;
  }
  get state(): HandlerContext<S>['state'] {
    return this.call.state;
  }
  afterReply(hook: () => void): void {
    this.call.afterReply(hook);
  }
}

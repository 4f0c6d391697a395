import { isReservedMethod } from '../protocol/reserved.js';
import type { Params } from '../protocol/types.js';
import type { HandlerContext } from './handler-context.js';
import { nameOf } from './method-descriptor.js';
import type { MethodDescriptor } from './method-descriptor.js';

export type Handler<S, P = unknown, R = unknown> = (
  params: P,
  ctx: HandlerContext<S>,
) => R | Promise<R>;

/**
 * Handlers by method name. One registry can serve many connections (the
 * server shares one across all sessions); names in the reserved `rpc.` space
 * are refused.
 */
export class MethodRegistry<S> {
  private readonly handlers = new Map<string, Handler<S>>();

  /** Register a handler; returns a function that removes it. */
  method<P extends Params | undefined, R>(
    descriptor: MethodDescriptor<P, R> | string,
    handler: Handler<S, P, R>,
  ): () => void {
    const name = nameOf(descriptor);
    if (isReservedMethod(name)) {
      throw new Error(`Method names starting with "rpc." are reserved: "${name}"`);
    }
    if (this.handlers.has(name)) throw new Error(`Method "${name}" is already registered`);
    this.handlers.set(name, handler as Handler<S>);
    return () => {
      if (this.handlers.get(name) === handler) this.handlers.delete(name);
    };
  }

  get(name: string): Handler<S> | undefined {
    return this.handlers.get(name);
  }

  has(name: string): boolean {
    return this.handlers.has(name);
  }

  names(): string[] {
    return [...this.handlers.keys()];
  }
}

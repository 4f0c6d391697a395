import { isReservedMethod } from '../protocol/reserved.js';
import type { Params } from '../protocol/types.js';
import type { HandlerContext } from './handler-context.js';
import type { MethodDescriptor } from './method-descriptor.js';
import { isRecord, refuse } from './option-rules.js';

export type Handler<S, P = unknown, R = unknown> = (
  params: P,
  ctx: HandlerContext<S>,
) => R | Promise<R>;

/**
 * Handlers by method name. One table can serve many connections (the server shares one across
 * all sessions); names in the reserved `rpc.` space are refused. What the browser client keeps
 * its handlers in; the server's MethodRegistry adds prefix routes.
 */
export class HandlerTable<S> {
  protected readonly handlers = new Map<string, Handler<S>>();

  /**
   * Register a handler; returns a function that removes it. Refused at once, so that the mistake
   * is reported at the line that made it rather than as -32603 on every later call: a name that
   * is not a string (nor a descriptor of one) is a TypeError, an empty one or one in the reserved
   * `rpc.` space a RangeError, a handler that is not a function a TypeError, and a name that
   * already has a handler an Error (the first handler stays).
   */
  method<P extends Params | undefined, R>(
    descriptor: MethodDescriptor<P, R> | string,
    handler: Handler<S, P, R>,
  ): () => void {
    const name = checkMethodName(descriptor);
    checkHandler(handler, `method "${name}": handler`);
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

/**
 * Handlers by method name, and by prefix (gateway mode's `orders.*` routes): the registry the
 * server shares across all sessions.
 */
export class MethodRegistry<S> extends HandlerTable<S> {
  /**
   * Whether some handler passes its params on as the client wrote them (a gateway's upstream
   * routes): the server's peers then keep the text of params holding a number JSON.stringify
   * would write otherwise (protocol/params-text.ts), which no other handler needs.
   */
  keepsParamsTexts = false;
  /** Prefix routes (`orders.*`), longest first: consulted only when the exact lookup misses. */
  private prefixes: { readonly prefix: string; readonly handler: Handler<S> }[] = [];

  /**
   * Register a handler for every method whose name starts with `prefix` and has no handler of
   * its own (gateway mode's `orders.*` routes); the longest matching prefix wins. Names in the
   * reserved `rpc.` space never reach it. Returns a function that removes it.
   */
  prefix(prefix: string, handler: Handler<S>): () => void {
    if (typeof prefix !== 'string') refuse('method prefix', 'a string', prefix);
    // The prefix is what names start with: a "*" in it is a pattern's, and would match nothing.
    if (prefix.includes('*')) {
      refuse('method prefix', 'the start of method names, without "*"', prefix, true);
    }
    if (isReservedMethod(prefix)) {
      throw new RangeError(`Method names starting with "rpc." are reserved: "${prefix}*"`);
    }
    checkHandler(handler, `method prefix "${prefix}*": handler`);
    if (this.prefixes.some((p) => p.prefix === prefix)) {
      throw new Error(`Prefix "${prefix}*" is already registered`);
    }
    const entry = { prefix, handler };
    this.prefixes = [...this.prefixes, entry].sort((a, b) => b.prefix.length - a.prefix.length);
    return () => {
      this.prefixes = this.prefixes.filter((p) => p !== entry);
    };
  }

  override get(name: string): Handler<S> | undefined {
    return this.handlers.get(name) ?? (this.prefixes.length > 0 ? this.byPrefix(name) : undefined);
  }

  /** The exact name, or the prefix pattern (`orders.*`) that serves `name`: a bounded label. */
  patternOf(name: string): string | undefined {
    if (this.handlers.has(name)) return name;
    const match = this.prefixMatch(name);
    return match ? `${match.prefix}*` : undefined;
  }

  private byPrefix(name: string): Handler<S> | undefined {
    return this.prefixMatch(name)?.handler;
  }

  private prefixMatch(name: string) {
    if (isReservedMethod(name)) return undefined;
    return this.prefixes.find((p) => name.startsWith(p.prefix));
  }
}

/**
 * The wire name of `descriptor` (a name, or a MethodDescriptor): a non-empty string outside the
 * reserved `rpc.` space (JSON-RPC 2.0 §4), else a TypeError (not a string) or a RangeError.
 * Kept short: the browser client carries it.
 */
export function checkMethodName(descriptor: unknown): string {
  const name = isRecord(descriptor) ? descriptor['name'] : descriptor;
  const text = typeof name === 'string';
  if (!text || name === '' || isReservedMethod(name)) {
    const what = 'a non-empty string, not starting with "rpc." (reserved)';
    refuse('method name', what, text ? name : descriptor, text);
  }
  return name;
}

/** A handler is called on every call: one that is not a function would answer each -32603. */
function checkHandler(handler: unknown, name: string): void {
  if (typeof handler !== 'function') refuse(name, 'a function', handler);
}

/** Whether `registry` asks the server's peers to keep params' texts (MethodRegistry.keepsParamsTexts). */
export const keepsParamsTexts = <S>(registry: HandlerTable<S>): boolean =>
  registry instanceof MethodRegistry && registry.keepsParamsTexts;

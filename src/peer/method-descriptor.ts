import type { Params } from '../protocol/types.js';

/**
 * A method's name together with its params and result types, so the caller
 * (`peer.call(Subtract, [42, 23])`) and the handler (`registry.method(Subtract, ...)`)
 * are checked against one declaration.
 */
export interface MethodDescriptor<P extends Params | undefined = Params | undefined, R = unknown> {
  readonly kind: 'method';
  readonly name: string;
  /** Type-only marker; never set at run time. */
  readonly types?: { params: P; result: R };
}

/**
 * The params argument of a call, a notification or a subscribe made with a descriptor, then
 * `Rest`: optional when the descriptor's params allow `undefined` (a method that takes none is
 * called as `call(Ping)`), required otherwise.
 */
export type ParamsArgs<P, Rest extends unknown[] = []> = undefined extends P
  ? [params?: NoInfer<P>, ...Rest]
  : [params: NoInfer<P>, ...Rest];

/** A notification's name with the type of its params. */
export interface NotificationDescriptor<P extends Params | undefined = Params | undefined> {
  readonly kind: 'notification';
  readonly name: string;
  readonly types?: { params: P };
}

/** A subscription's topic or stream name with the types of its params and of each message. */
export interface SubscriptionDescriptor<P = unknown, T = unknown> {
  readonly kind: 'subscription';
  readonly name: string;
  readonly types?: { params: P; data: T };
}

export function subscription<P = undefined, T = unknown>(
  name: string,
): SubscriptionDescriptor<P, T> {
  return { kind: 'subscription', name };
}

export function method<P extends Params | undefined = undefined, R = unknown>(
  name: string,
): MethodDescriptor<P, R> {
  return { kind: 'method', name };
}

export function notification<P extends Params | undefined = undefined>(
  name: string,
): NotificationDescriptor<P> {
  return { kind: 'notification', name };
}

export type ParamsOf<D> =
  D extends MethodDescriptor<infer P, unknown>
    ? P
    : D extends NotificationDescriptor<infer P>
      ? P
      : never;
export type ResultOf<D> = D extends MethodDescriptor<Params | undefined, infer R> ? R : never;

/** The wire name of a descriptor, or the name itself. */
export function nameOf(target: { readonly name: string } | string): string {
  return typeof target === 'string' ? target : target.name;
}

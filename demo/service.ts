import { InvalidParamsError, method, notification } from '../src/index.js';
import type { Gateway, Params } from '../src/index.js';

/** Typed descriptors: shared by the handlers below and by any typed client. */
export const Subtract = method<[number, number] | { minuend: number; subtrahend: number }, number>(
  'subtract',
);
export const Sum = method<number[], number>('sum');
export const GetData = method<undefined, [string, number]>('get_data');
export const AskClient = method<{ question: string } | [string], unknown>('ask_client');
/** Implemented by the client: the server calls it from `ask_client`. */
export const ClientConfirm = method<{ question: string }, unknown>('client.confirm');
export const Hello = notification<[number]>('hello');

function isNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

function numbersFrom(params: Params | undefined, name: string): number[] {
  if (!Array.isArray(params) || !params.every(isNumber)) {
    throw new InvalidParamsError(`${name} takes an array of numbers`);
  }
  return params;
}

/**
 * The JSON-RPC 2.0 specification's example methods, so its examples can be
 * pasted as they are, plus one that calls back into the connected client.
 */
export function registerDemoService(gateway: Gateway): void {
  gateway.method(Subtract, (params) => {
    if (Array.isArray(params)) {
      const [minuend, subtrahend] = params;
      if (params.length !== 2 || !isNumber(minuend) || !isNumber(subtrahend)) {
        throw new InvalidParamsError('subtract takes [minuend, subtrahend]');
      }
      return minuend - subtrahend;
    }
    const { minuend, subtrahend } = (params ?? {}) as { minuend?: unknown; subtrahend?: unknown };
    if (!isNumber(minuend) || !isNumber(subtrahend)) {
      throw new InvalidParamsError('subtract takes { minuend, subtrahend }');
    }
    return minuend - subtrahend;
  });

  gateway.method(Sum, (params) => numbersFrom(params, 'sum').reduce((a, b) => a + b, 0));

  // The spec sends these as notifications; they do their work and answer nothing.
  gateway.method('update', (params, ctx) => {
    ctx.logger.debug({ params }, 'update');
    return null;
  });
  gateway.method('notify_hello', (params, ctx) => {
    const [n] = numbersFrom(params, 'notify_hello');
    ctx.session.notify(Hello, [n ?? 0]);
    return null;
  });

  gateway.method(GetData, () => ['hello', 5]);

  gateway.method(AskClient, async (params, ctx) => {
    const question = Array.isArray(params) ? params[0] : params?.question;
    if (typeof question !== 'string') throw new InvalidParamsError('ask_client takes { question }');
    const answer = await ctx.session.call(ClientConfirm, { question }, { signal: ctx.signal });
    return { question, answer };
  });
}

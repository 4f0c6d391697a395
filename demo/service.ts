import { map, take, timer } from 'rxjs';
import {
  clientApi,
  contractEvents,
  implementContract,
  method,
  notification,
} from '../src/index.js';
import type { Gateway } from '../src/index.js';
import { demoContract } from './contract.js';

/** Typed descriptors for code that calls by name (the contract's `useContract` is the other way). */
export const Subtract = method<[number, number] | { minuend: number; subtrahend: number }, number>(
  'subtract',
);
export const Sum = method<number[], number>('sum');
export const GetData = method<undefined, [string, number]>('get_data');
export const AskClient = method<{ question: string } | [string], unknown>('ask_client');
/** Implemented by the client: the server calls it from `ask_client`. */
export const ClientConfirm = method<{ question: string }, unknown>('client.confirm');
/** The contract's `hello` notification, for clients that do not use the contract. */
export const Hello = notification<[number]>('hello');
/** The close code of `demo.drop` (4000-4999: for applications). */
export const DROP_CLOSE_CODE = 4001;

/**
 * The JSON-RPC 2.0 specification's example methods, so its examples can be
 * pasted as they are, plus one that calls back into the connected client,
 * a chat and a countdown stream, all implementing `demoContract`.
 */
export function registerDemoService<C>(gateway: Gateway<C>): void {
  // The contract's notifications and topics, typed by it: a wrong payload does not compile.
  const { notify, publish } = contractEvents(gateway, demoContract);
  implementContract(gateway, demoContract, {
    methods: {
      subtract: ({ minuend, subtrahend }) => minuend - subtrahend,
      sum: (numbers) => numbers.reduce((a, b) => a + b, 0),
      // The spec sends these as notifications; they do their work and answer nothing.
      update: () => null,
      notify_hello: ([n], ctx) => {
        notify(ctx.session, 'hello', [n]);
        return null;
      },
      get_data: (): [string, number] => ['hello', 5],
      ask_client: async ({ question }, ctx) => {
        const answer = await clientApi(ctx.session, demoContract)['client.confirm'](
          { question },
          { signal: ctx.signal },
        );
        return { question, answer };
      },
      'demo.drop': (_params, ctx) => {
        // After the reply is on the wire: the caller sees `true`, then the close.
        ctx.afterReply(() => ctx.session.close(DROP_CLOSE_CODE, 'dropped on request'));
        return true as const;
      },
      // Everyone else gets it from the topic; the sender's page shows its own at once.
      'chat.send': ({ text, from }, ctx) =>
        publish(
          'chat',
          { from: from || ctx.session.id, text, at: Date.now() },
          { except: ctx.session.id },
        ),
    },
    // A slow ticker subscriber only ever needs the newest price.
    // Who is in the chat: every subscriber of `chat`, on every node (client.presence('chat')).
    topics: { ticker: { slowConsumer: 'keep-latest' }, chat: { presence: true } },
    streams: {
      countdown: ({ from }) =>
        timer(0, 200).pipe(
          take(from + 1),
          map((i) => from - i),
        ),
    },
  });
}

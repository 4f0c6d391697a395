import { interval, map, take, timer } from 'rxjs';
import { InvalidParamsError, method, subscription } from '../src/index.js';
import type { Gateway } from '../src/index.js';

export interface Tick {
  symbol: string;
  price: number;
  at: number;
}

export interface ChatMessage {
  from: string;
  text: string;
  at: number;
}

/** Typed names for clients. */
export const Ticker = subscription<undefined, Tick>('ticker');
export const Chat = subscription<undefined, ChatMessage>('chat');
export const Countdown = subscription<{ from: number }, number>('countdown');
export const ChatSend = method<{ from?: string; text: string }, number>('chat.send');

/**
 * The demo's live data: a `ticker` topic fed by a random walk every second, a
 * `chat` topic anything sent through `chat.send` reaches, and a per-subscriber
 * `countdown` stream. Returns a function that stops the ticker.
 */
export function registerDemoPubSub(gateway: Gateway, tickMs = 1_000): () => void {
  // A slow ticker subscriber only ever needs the newest price.
  gateway.topic('ticker', { slowConsumer: 'keep-latest' });
  gateway.topic('chat');

  gateway.stream<{ from?: unknown }, number>('countdown', (params) => {
    const from = params?.from ?? 10;
    if (!Number.isInteger(from) || (from as number) < 0 || (from as number) > 1_000) {
      throw new InvalidParamsError('countdown takes { from: integer 0..1000 }');
    }
    const start = from as number;
    return timer(0, 200).pipe(
      take(start + 1),
      map((i) => start - i),
    );
  });

  gateway.method(ChatSend, (params, ctx) => {
    const text = params?.text;
    if (typeof text !== 'string' || text.length === 0 || text.length > 2_000) {
      throw new InvalidParamsError('chat.send takes { text: 1..2000 characters, from? }');
    }
    const from =
      typeof params.from === 'string' && params.from.length > 0
        ? params.from.slice(0, 40)
        : ctx.session.id;
    return gateway.publish('chat', { from, text, at: Date.now() } satisfies ChatMessage);
  });

  let price = 100;
  const ticks = interval(tickMs).pipe(
    map((): Tick => {
      price = Math.max(1, price * (1 + (Math.random() - 0.5) / 50));
      return { symbol: 'DEMO', price: Math.round(price * 100) / 100, at: Date.now() };
    }),
  );
  const running = gateway.publishFrom('ticker', ticks);
  return () => running.unsubscribe();
}

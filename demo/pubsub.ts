import { interval, map } from 'rxjs';
import { method, subscription } from '../src/index.js';
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

/** Typed names for clients that do not use the contract. */
export const Ticker = subscription<undefined, Tick>('ticker');
export const Chat = subscription<undefined, ChatMessage>('chat');
export const Countdown = subscription<{ from: number }, number>('countdown');
export const ChatSend = method<{ from?: string; text: string }, number>('chat.send');

/**
 * The demo's live data: feeds the `ticker` topic (declared by the contract)
 * with a random walk every `tickMs`. Returns a function that stops it.
 */
export function startTicker<C>(gateway: Gateway<C>, tickMs = 1_000): () => void {
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

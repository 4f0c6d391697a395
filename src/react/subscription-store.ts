// One subscription's status, latest message and history window, shared by the components
// that show the same topic and params. Its messages come from `client.subscribeWithMeta` (the
// client shares one wire subscription per topic and params) and its status from
// `subscriptionStatus$`.
import type { Subscription } from 'rxjs';
import type { RpcClient } from '../client/client.js';
import { subscriptionStatus$ } from '../client/subscription-status.js';
import type { SubscriptionStatus } from '../client/subscription-status.js';
import { SharedStore } from './shared-store.js';

/** What `useSubscription` shows, before its history is cut to the component's window. */
export interface SubscriptionSnapshot<T> {
  status: SubscriptionStatus;
  /** The latest message. */
  data: T | undefined;
  /** The last messages, oldest first, as many as the largest window any holder asked for. */
  history: readonly T[];
  /** What ended it: the server's refusal, a stream's error, a message the contract refused. */
  error: unknown;
}

/** Each message through the contract's schema (sync or async); throws or rejects to refuse one. */
export type Parse = (data: unknown) => unknown;

const CONNECTING: SubscriptionStatus = { state: 'connecting' };
const NONE: readonly never[] = [];

export class SubscriptionStore<T> extends SharedStore<SubscriptionSnapshot<T>> {
  #running: Subscription[] = [];
  /** Bumped at each stop, so what a stopped run still delivers (an async parse) is dropped. */
  #run = 0;
  /** While an async parse runs: what came after it, in order. */
  #waiting: (() => Promise<void> | void)[] | undefined;
  /** The window each listening component asked for. */
  readonly #windows = new Map<() => void, number>();
  #window = 0;

  constructor(
    private readonly client: RpcClient,
    private readonly topic: string,
    private readonly params: unknown,
    private readonly parse: Parse | undefined,
  ) {
    super({ status: CONNECTING, data: undefined, history: NONE, error: undefined });
  }

  /** `subscribe` for a component that shows the last `window` messages. */
  listen(listener: () => void, window: number): () => void {
    this.#windows.set(listener, window);
    this.#window = Math.max(this.#window, window);
    const unsubscribe = this.subscribe(listener);
    return () => {
      this.#windows.delete(listener);
      this.#window = Math.max(0, ...this.#windows.values());
      unsubscribe();
    };
  }

  /** Unsubscribe and subscribe again, fresh: no data, no history, no error. */
  readonly reset = (): void => {
    const held = this.held;
    this.stop();
    this.set({ status: CONNECTING, data: undefined, history: NONE, error: undefined });
    if (held) this.start();
  };

  protected start(): void {
    const run = this.#run;
    const live = (): boolean => run === this.#run;
    // The messages first: the status then starts from the entry this subscribe made.
    const messages = this.client.subscribeWithMeta<unknown>(this.topic, this.params).subscribe({
      next: (event) => {
        if (event.gap === undefined) this.#message(event.data, event.seq, live);
      },
      error: (error: unknown) => this.#after(() => this.#fail(error), live),
    });
    const status = subscriptionStatus$(this.client, this.topic, this.params).subscribe({
      next: (status) => this.#status(status),
      error: (error: unknown) => this.#fail(error),
    });
    this.#running = [messages, status];
  }

  protected stop(): void {
    this.#run++;
    this.#waiting = undefined;
    for (const each of this.#running.splice(0)) each.unsubscribe();
  }

  #status(status: SubscriptionStatus): void {
    const now = this.snapshot;
    const was = now.status.state;
    // A gap moves on to 'subscribed' at once: 'gap' stays shown until the next message, so
    // that a render sees it.
    if (was === 'gap' && status.state === 'subscribed') return;
    if (was === status.state && status.state !== 'gap') return;
    // The messages' error may have been told first: the status says the same.
    if (was === 'error' && status.state === 'error') return;
    const error = status.state === 'error' ? status.error : now.error;
    this.set({ ...now, status, error });
  }

  #message(data: unknown, seq: number | undefined, live: () => boolean): void {
    const parse = this.parse;
    if (!parse) return this.#add(data as T, seq);
    this.#after(() => {
      let parsed: unknown;
      try {
        parsed = parse(data);
      } catch (error) {
        return this.#refuse(error);
      }
      if (!(parsed instanceof Promise)) return this.#add(parsed as T, seq);
      return parsed.then(
        (valid: unknown) => {
          if (live()) this.#add(valid as T, seq);
        },
        (error: unknown) => {
          if (live()) this.#refuse(error);
        },
      );
    }, live);
  }

  /** Run `step` now, or behind the async parses still running, so that messages keep their order. */
  #after(step: () => Promise<void> | void, live: () => boolean): void {
    if (this.#waiting) {
      this.#waiting.push(step);
      return;
    }
    const running = step();
    if (!running) return;
    const waiting: (() => Promise<void> | void)[] = (this.#waiting = []);
    void (async () => {
      await running;
      for (let next = waiting.shift(); next && live(); next = waiting.shift()) await next();
      if (this.#waiting === waiting) this.#waiting = undefined;
    })();
  }

  #add(data: T, seq: number | undefined): void {
    const now = this.snapshot;
    const keep = this.#window;
    const history =
      keep === 0 ? NONE : [...now.history.slice(Math.max(0, now.history.length - keep + 1)), data];
    let status = now.status;
    if (status.state === 'gap') status = { state: 'subscribed' };
    if (seq !== undefined) status = { ...status, seq };
    this.set({ ...now, status, data, history });
  }

  /** A message the contract refused ends the subscription, as `useContract`'s does. */
  #refuse(error: unknown): void {
    this.stop();
    this.#fail(error);
  }

  #fail(error: unknown): void {
    const now = this.snapshot;
    if (now.status.state === 'error' && now.error === error) return;
    this.set({ ...now, status: { state: 'error', error }, error });
  }
}

// One subscription's status, latest message and history window, shared by the components
// that show the same topic and params. Its messages come from `client.subscribeWithMeta` (the
// client shares one wire subscription per topic and params) and its status from
// `subscriptionStatus$`. Messages waiting for an async parse are held in a bounded buffer.
import type { Observable, Subscription } from 'rxjs';
import { BufferOverflowError } from '../client/async-iterate.js';
import type { RpcClient } from '../client/client.js';
import { subscriptionStatus$ } from '../client/subscription-status.js';
import type { SubscriptionStatus } from '../client/subscription-status.js';
import { SharedStore } from './shared-store.js';
import type { SubscriptionBuffer } from './subscription-options.js';

/** What `useSubscription` shows, before its history is cut to the component's window. */
export interface SubscriptionSnapshot<T> {
  status: SubscriptionStatus;
  /** The latest message. */
  data: T | undefined;
  /** The last messages, oldest first, as many as the largest window any holder asked for. */
  history: readonly T[];
  /** What ended it: the server's refusal, a stream's error, a message the contract refused. */
  error: unknown;
  /** Messages dropped unparsed because the buffer waiting for an async parse was full. */
  dropped: number;
}

/** A client's own status method (`SharedRpcClient.subscriptionStatus$`). */
type OwnStatus = (topic: string, params: unknown) => Observable<SubscriptionStatus>;

/** Each message through the contract's schema (sync or async); throws or rejects to refuse one. */
export type Parse = (data: unknown) => unknown;

const CONNECTING: SubscriptionStatus = { state: 'connecting' };
const NONE: readonly never[] = [];
const FRESH = { status: CONNECTING, data: undefined, history: NONE, error: undefined, dropped: 0 };

/** What waits behind an async parse: a message's step (counted in the buffer) or the end's. */
interface Step {
  run: () => Promise<void> | void;
  message: boolean;
}

/** A promise, or another thenable a schema library gives. */
function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}

export class SubscriptionStore<T> extends SharedStore<SubscriptionSnapshot<T>> {
  #running: Subscription[] = [];
  /** Bumped at each stop, so what a stopped run still delivers (an async parse) is dropped. */
  #run = 0;
  /** While an async parse runs: what came after it, in order, at most `bufferSize` messages. */
  #waiting: Step[] | undefined;
  /** How many of `#waiting` are messages (the end's step is not counted). */
  #waitingMessages = 0;
  /** The window each listening component asked for. */
  readonly #windows = new Map<() => void, number>();
  #window = 0;

  constructor(
    private readonly client: RpcClient,
    private readonly topic: string,
    private readonly params: unknown,
    private readonly parse: Parse | undefined,
    private readonly buffer: SubscriptionBuffer,
  ) {
    super(FRESH);
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
    this.set(FRESH);
    if (held) this.start();
  };

  protected start(): void {
    const run = this.#run;
    const live = (): boolean => run === this.#run;
    try {
      // The messages first: the status then starts from the entry this subscribe made.
      const messages = this.client.subscribeWithMeta<unknown>(this.topic, this.params).subscribe({
        next: (event) => {
          if (event.gap === undefined) this.#message(event.data, event.seq, live);
        },
        error: (error: unknown) =>
          this.#after({ run: () => this.#fail(error), message: false }, live),
      });
      this.#running.push(messages);
      this.#running.push(
        this.#status$().subscribe({
          next: (status) => this.#status(status),
          error: (error: unknown) => this.#fail(error),
        }),
      );
    } catch (error) {
      // Params that cannot be sent (a BigInt, a cycle): shown as the subscription's error.
      this.stop();
      this.#fail(error);
    }
  }

  /**
   * The status of this subscription: the client's own `subscriptionStatus$` where it has one
   * (a `createSharedClient` client, which has no RpcClient to pass), else the function's.
   */
  #status$(): Observable<SubscriptionStatus> {
    const own = (this.client as { subscriptionStatus$?: unknown }).subscriptionStatus$;
    if (typeof own !== 'function') return subscriptionStatus$(this.client, this.topic, this.params);
    return (own as OwnStatus).call(this.client, this.topic, this.params);
  }

  protected stop(): void {
    this.#run++;
    this.#waiting = undefined;
    this.#waitingMessages = 0;
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
    const run = (): Promise<void> | void => {
      let parsed: unknown;
      try {
        parsed = parse(data);
      } catch (error) {
        return this.#refuse(error);
      }
      if (!isThenable(parsed)) return this.#add(parsed as T, seq);
      return Promise.resolve(parsed).then(
        (valid: unknown) => {
          if (live()) this.#add(valid as T, seq);
        },
        (error: unknown) => {
          if (live()) this.#refuse(error);
        },
      );
    };
    this.#after({ run, message: true }, live);
  }

  /**
   * Run `step` now, or behind the async parses still running, so that messages keep their
   * order. A message finding `bufferSize` messages waiting drops the oldest (counted in
   * `dropped`) or, with overflow 'error', ends the subscription with BufferOverflowError.
   */
  #after(step: Step, live: () => boolean): void {
    const waiting = this.#waiting;
    if (waiting) {
      if (step.message && this.#waitingMessages >= this.buffer.bufferSize) {
        if (this.buffer.overflow === 'error') return this.#overflow();
        // The end's step comes after every message: the oldest waiting is a message.
        waiting.shift();
        this.#waitingMessages--;
        this.set({ ...this.snapshot, dropped: this.snapshot.dropped + 1 });
      }
      waiting.push(step);
      if (step.message) this.#waitingMessages++;
      return;
    }
    const running = step.run();
    if (!running) return;
    const queue: Step[] = (this.#waiting = []);
    void (async () => {
      await running;
      for (let next = queue.shift(); next && live(); next = queue.shift()) {
        if (next.message) this.#waitingMessages--;
        await next.run();
      }
      if (this.#waiting === queue) this.#waiting = undefined;
    })();
  }

  /** The buffer waiting for the parse is full with overflow 'error': the subscription ends. */
  #overflow(): void {
    const error = new BufferOverflowError(this.buffer.bufferSize);
    error.message = `useSubscription: the parse fell ${this.buffer.bufferSize} messages behind`;
    this.#refuse(error);
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

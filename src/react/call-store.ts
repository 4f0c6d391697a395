// One call's result, shared by the components that ask for the same method and params.
import { SharedStore } from './shared-store.js';

/** What `useCall` shows. */
export interface CallSnapshot<R> {
  /** The last result; kept while a refetch is under way, and after a refetch that failed. */
  data: R | undefined;
  /** Why the last call failed; cleared by the next result. */
  error: unknown;
  /** A call is under way. */
  loading: boolean;
}

/** Makes the call; aborting `signal` cancels it (the server is sent rpc.cancel). */
export type Run<R> = (signal: AbortSignal) => Promise<R>;

export class CallStore<R> extends SharedStore<CallSnapshot<R>> {
  #running: AbortController | undefined;

  constructor(private readonly run: Run<R>) {
    super({ data: undefined, error: undefined, loading: true });
  }

  /** Call again (the call under way, if any, is aborted). Only while a component holds it. */
  readonly refetch = (): void => {
    if (this.held) this.#call();
  };

  protected start(): void {
    this.#call();
  }

  /**
   * A component mounting (or turning `enabled`) joins a settled call: it calls again for every
   * holder, as a fresh mount expects (and a failed result is retried). One that joins a call
   * under way shares it, which keeps StrictMode's remount to one call.
   */
  protected override joined(): void {
    if (!this.#running) this.#call();
  }

  protected stop(): void {
    const running = this.#running;
    this.#running = undefined;
    running?.abort();
  }

  #call(): void {
    this.stop();
    const running = (this.#running = new AbortController());
    if (!this.snapshot.loading) this.set({ ...this.snapshot, loading: true });
    const settle = (next: CallSnapshot<R>): void => {
      if (this.#running !== running) return;
      this.#running = undefined;
      this.set(next);
    };
    let call: Promise<R>;
    try {
      call = this.run(running.signal);
    } catch (error) {
      // Params that cannot be sent throw at once: shown like a failed call.
      call = Promise.reject(error as Error);
    }
    call.then(
      (data) => settle({ data, error: undefined, loading: false }),
      (error: unknown) => settle({ data: this.snapshot.data, error, loading: false }),
    );
  }
}

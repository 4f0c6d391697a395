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

  // A component mounting (or turning `enabled`) beside holders shares what they have: the call
  // under way (StrictMode's remount makes none of its own) or its settled result. Calling again
  // there instead would set `loading` for every holder, and a parent that shows a spinner while
  // loading and, once loaded, a child asking the same would unmount and remount that child
  // without end. A fresh call comes with `refetch`, or with the next mount once none holds it.

  /** Call again (the call under way, if any, is aborted). Only while a component holds it. */
  readonly refetch = (): void => {
    if (this.held) this.#call();
  };

  protected start(): void {
    this.#call();
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

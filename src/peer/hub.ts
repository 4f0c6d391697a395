import { Observable } from 'rxjs';
import type { Observer, Subscriber } from 'rxjs';

/*
 * The few stream tools the engine needs, built on rxjs's Observable alone: what it shows the
 * application is an rxjs Observable, but Subject, BehaviorSubject and the operators stay out of
 * the browser client's bundle.
 */

/**
 * One source, many observers, as an rxjs Subject: each value goes to the observers there are
 * when it is sent (in the order they came); after `complete` or `error` nothing more is sent,
 * and an observer that comes later gets that end at once. Made with `replay`, it holds a current
 * value (`value`) that each new observer gets first, as a BehaviorSubject (a value sent by an
 * observer while another is sent replaces it for the observers not told yet); without, it holds no
 * value it sent (a subscription's hub would otherwise keep its last message alive, and every
 * message it sends would outlive the young generation, long after its observers are done).
 */
export class Hub<T> {
  /**
   * Undefined once ended. Replaced on each change, never changed in place: a value goes to the
   * observers there were when it was sent, without a copy per value.
   */
  #observers: Partial<Observer<T>>[] | undefined = [];
  /** Set when it ended with an error. */
  #failure: { error: unknown } | undefined;

  /** The stream as observers see it. */
  readonly observable: Observable<T> = new Observable<T>((subscriber) => this.#add(subscriber));

  constructor(
    public value?: T,
    private readonly replay = false,
  ) {}

  next(value: T): void {
    const observers = this.#observers;
    if (!observers) return;
    if (!this.replay) {
      for (const o of observers) o.next?.(value);
      return;
    }
    this.value = value;
    // An observer may send a value, or end the hub, while this one is being sent: the observers
    // not told yet get only the newer (a state's observers all end on the state it is in).
    for (const o of observers) {
      if (this.value !== value || !this.#observers) return;
      o.next?.(value);
    }
  }

  complete(): void {
    this.#end()?.forEach((o) => o.complete?.());
  }

  error(error: unknown): void {
    this.#failure ??= { error };
    this.#end()?.forEach((o) => o.error?.(error));
  }

  /**
   * Add `observer` as it is, with no rxjs Subscriber around it: for a consumer that forwards to
   * a Subscriber of its own, one object less on every value. Returns what removes it; undefined
   * when the hub had ended (the observer was told at once).
   */
  watch(observer: Partial<Observer<T>>): (() => void) | undefined {
    return this.#add(observer);
  }

  /** The first value `test` accepts, the current one included when replaying; undefined if it ends first. */
  first(test: (value: T) => boolean): Promise<T | undefined> {
    return new Promise((resolve) => {
      const observer: Partial<Observer<T>> = {
        next: (value) => {
          if (!test(value)) return;
          this.#remove(observer);
          resolve(value);
        },
        error: () => resolve(undefined),
        complete: () => resolve(undefined),
      };
      this.#add(observer);
    });
  }

  #add(observer: Partial<Observer<T>> | Subscriber<T>): (() => void) | undefined {
    const observers = this.#observers;
    if (!observers) {
      if (this.#failure) observer.error?.(this.#failure.error);
      else observer.complete?.();
      return undefined;
    }
    this.#observers = [...observers, observer];
    if (this.replay) observer.next?.(this.value as T);
    return () => this.#remove(observer);
  }

  #remove(observer: Partial<Observer<T>>): void {
    this.#observers &&= this.#observers.filter((o) => o !== observer);
  }

  #end(): Partial<Observer<T>>[] | undefined {
    const observers = this.#observers;
    this.#observers = undefined;
    return observers;
  }
}

/**
 * `source` passed through `step`: for each observer, `step(to)` gives the function that gets
 * each value and sends `to` what it will (a map, a filter, a fold with its own state); errors
 * and completion go through as they are.
 */
export function through<T, R>(
  source: Observable<T>,
  step: (to: Subscriber<R>) => (value: T) => void,
): Observable<R> {
  return new Observable<R>((to) =>
    source.subscribe({
      next: step(to),
      error: (err: unknown) => to.error(err),
      complete: () => to.complete(),
    }),
  );
}

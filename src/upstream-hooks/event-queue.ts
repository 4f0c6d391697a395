import type { Logger } from '../peer/logger.js';
import type { Tracing } from '../tracing/tracing.js';
import type { JsonRpcHttpClient } from '../upstream/json-rpc-http-client.js';
import { failureOf } from './hook-answers.js';
import { tracedHookRequest } from './hook-call.js';
import type { HookMetrics } from './hook-metrics.js';
import type { EventsHookConfig, LifecycleEventType } from './hooks-config.js';

/** One lifecycle event as `wsrpc.events` carries it. */
export interface LifecycleEvent {
  readonly type: LifecycleEventType;
  readonly sessionId: string;
  readonly user?: string;
  /** Ms since the epoch. */
  readonly at: number;
  /** disconnect: the close code and reason. */
  readonly code?: number;
  readonly reason?: string;
  /** subscribe, unsubscribe: the topic. */
  readonly topic?: string;
}

/** The first retry of a batch waits this long, doubling (with jitter) up to MAX_BACKOFF_MS. */
const BASE_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 5_000;

/**
 * Lifecycle events on their way to the events hook: `push` never waits and never fails (a
 * connection is never held by its event); events leave as `wsrpc.events` notifications of up to
 * `batchSize`, once that many wait or `flushIntervalMs` after the first, one request at a time,
 * in order. A batch the upstream does not take is sent again `retries` times with backoff, then
 * dropped. At most `maxQueued` wait besides the batch being sent: a new event beyond that drops
 * the oldest. Both losses are counted (`wsrpc_hook_events_dropped_total{reason}`).
 */
export class EventQueue {
  /** A ring: `head` is the oldest, `size` how many wait. */
  private readonly ring: (LifecycleEvent | undefined)[];
  private head = 0;
  private size = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private sending: Promise<void> | undefined;
  /** A batch failed once the queue was closing: what waits is dropped, not tried. */
  private failedWhileClosing = false;
  private closed = false;
  /** Wakes a backoff early when the queue closes. */
  private wake: (() => void) | undefined;

  constructor(
    private readonly config: EventsHookConfig,
    private readonly client: JsonRpcHttpClient,
    private readonly deps: { logger: Logger; tracing: Tracing; metrics: HookMetrics },
  ) {
    this.ring = new Array<LifecycleEvent | undefined>(config.maxQueued);
  }

  /** Events waiting (not counting a batch being sent). */
  get length(): number {
    return this.size;
  }

  push(event: LifecycleEvent): void {
    if (this.closed) return;
    const capacity = this.ring.length;
    if (this.size === capacity) {
      this.head = (this.head + 1) % capacity;
      this.size--;
      this.deps.metrics.dropped.inc({ reason: 'overflow' });
    }
    this.ring[(this.head + this.size) % capacity] = event;
    this.size++;
    this.deps.metrics.queued.set(this.size);
    if (this.sending) return;
    if (this.size >= this.config.batchSize) this.startSending();
    else this.timer ??= setTimeout(() => this.startSending(), this.config.flushIntervalMs);
  }

  /**
   * Send what waits (one attempt per batch, until one fails), then stop: within one `timeoutMs`
   * from now, the batch under way included, so a hook that does not answer holds a shutdown
   * that long at most. What is left then, or after a failure (the batch under way's too), is
   * dropped.
   */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.wake?.();
    const deadline = Date.now() + this.config.timeoutMs;
    await this.sending;
    while (this.size > 0) {
      const left = deadline - Date.now();
      if (this.failedWhileClosing || left <= 0) {
        // The upstream is not taking them: the rest would wait a timeout each for nothing.
        const why = this.failedWhileClosing
          ? new Error('a batch failed as the gateway closed')
          : new Error(
              `the events hook's timeoutMs (${this.config.timeoutMs} ms) passed as the gateway closed`,
            );
        this.lose(this.take(this.size), why);
        return;
      }
      const batch = this.take();
      try {
        await this.send(batch, left);
      } catch (err) {
        this.failedWhileClosing = true;
        this.lose(batch, err);
      }
    }
  }

  private startSending(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.sending || this.size === 0 || this.closed) return;
    this.sending = this.drain().finally(() => {
      this.sending = undefined;
      if (this.size > 0 && !this.closed) {
        this.timer ??= setTimeout(() => this.startSending(), this.config.flushIntervalMs);
      }
    });
  }

  /** Send full batches back to back; a partial one waits for the next flush. */
  private async drain(): Promise<void> {
    do {
      const batch = this.take();
      await this.deliver(batch);
    } while (this.size >= this.config.batchSize && !this.closed);
  }

  private take(most = this.config.batchSize): LifecycleEvent[] {
    const count = Math.min(this.size, most);
    const batch = new Array<LifecycleEvent>(count);
    const capacity = this.ring.length;
    for (let i = 0; i < count; i++) {
      batch[i] = this.ring[this.head]!;
      this.ring[this.head] = undefined;
      this.head = (this.head + 1) % capacity;
    }
    this.size -= count;
    this.deps.metrics.queued.set(this.size);
    return batch;
  }

  private async deliver(batch: LifecycleEvent[]): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.send(batch);
        return;
      } catch (err) {
        if (attempt >= this.config.retries || this.closed) {
          if (this.closed) this.failedWhileClosing = true;
          this.lose(batch, err);
          return;
        }
        await this.backoff(attempt);
      }
    }
  }

  private async send(batch: LifecycleEvent[], timeoutMs = this.config.timeoutMs): Promise<void> {
    try {
      await tracedHookRequest(
        this.deps.tracing,
        this.client,
        'wsrpc.events',
        { events: batch },
        { timeoutMs, notify: true },
      );
      this.deps.metrics.outcome('events', 'sent');
    } catch (err) {
      this.deps.metrics.outcome('events', 'failed');
      throw err;
    }
  }

  private lose(batch: LifecycleEvent[], err: unknown): void {
    this.deps.metrics.dropped.inc({ reason: 'undeliverable' }, batch.length);
    this.deps.logger.warn(
      { ...failureOf(err), events: batch.length },
      'events hook: batch dropped',
    );
  }

  private backoff(attempt: number): Promise<void> {
    const ceiling = Math.min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** attempt);
    const delay = ceiling / 2 + Math.random() * (ceiling / 2);
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, delay);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    }).finally(() => (this.wake = undefined));
  }
}

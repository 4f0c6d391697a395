// The user's inbox on the client (ClientOptions.inbox): one `$inbox` subscription kept for the
// client's whole life through the ordinary subscription machinery (so it resumes from the last
// message seen, on any node, with epochs and gap signals), each message handed to the same
// place plain server notifications go. Apart from the client so that it costs nothing when off.
import type { Observable } from 'rxjs';
import { Hub } from '../peer/hub.js';
import { RunningCall } from '../peer/handler-context.js';
import type { Logger } from '../peer/logger.js';
import type { HandlerTable } from '../peer/method-registry.js';
import type { IncomingNotification } from '../peer/notifications.js';
import { isPromiseLike } from '../peer/replies.js';
import { isReservedMethod } from '../protocol/reserved.js';
import type { Params } from '../protocol/types.js';
import type { SubscriptionEvent } from './subscriptions.js';

/** The subscribe name of the connection's own user's inbox (the gateway's `userInbox`). */
export const INBOX_SUBSCRIPTION = '$inbox';

/**
 * Messages of the user's inbox that will never arrive: `gap` of them (null: unknown how
 * many) were lost beyond the server's retention, or skipped, or came malformed (no method) and
 * were dropped. Time to refetch.
 */
export interface InboxGap {
  gap: number | null;
}

/** What the inbox needs of the client it serves. */
export interface InboxHost<S> {
  /** The client's own subscribeWithMeta. */
  subscribeWithMeta(topic: string): Observable<SubscriptionEvent<unknown>>;
  /** Handlers for the server's notifications (client.method), run as for a plain one. */
  readonly registry: HandlerTable<S>;
  /** The `session` those handlers see: the client. */
  readonly session: S;
  /** Where plain server notifications go (client.notifications$). */
  emit(notification: IncomingNotification): void;
  readonly logger: Logger;
}

/**
 * The client's end of the user's inbox. Each message (`{ method, params }`) reaches the
 * client's handler for `method`, if any, and `notifications$` / `notificationsOf(method)`,
 * exactly as a plain notification would; lost ones are told on `gaps$`.
 */
export class ClientInbox<S> {
  readonly #gapSubject = new Hub<InboxGap>();
  /** Gap signals of the inbox; completes when the client closes or the server keeps no inbox. */
  readonly gaps$: Observable<InboxGap> = this.#gapSubject.observable;

  constructor(private readonly host: InboxHost<S>) {}

  /**
   * Subscribe `$inbox` until the client closes (`enabled`; else `gaps$` completes at once).
   * A server that refuses is told once, in the log, and not asked again. Called once, by the
   * client's constructor.
   */
  start(enabled: boolean): void {
    if (!enabled) {
      this.#gapSubject.complete();
      return;
    }
    this.host.subscribeWithMeta(INBOX_SUBSCRIPTION).subscribe({
      next: (event) => this.#received(event),
      error: (err: unknown) => {
        // Not retried: transient failures (broker down, timeouts) were retried already; this
        // is the server's final word (no userInbox, or a session without a user).
        this.host.logger.warn(
          { err },
          'the server keeps no inbox for this connection: user messages reach it only while connected',
        );
        this.#gapSubject.complete();
      },
      complete: () => this.#gapSubject.complete(),
    });
  }

  #received(event: SubscriptionEvent<unknown>): void {
    if (event.gap !== undefined) {
      this.#gapSubject.next({ gap: event.gap });
      return;
    }
    // Skipped for a slow connection (a server that drops rather than disconnects).
    if (event.missed) this.#gapSubject.next({ gap: event.missed });
    const message = event.data as { method?: unknown; params?: unknown } | null | undefined;
    if (typeof message?.method !== 'string') {
      // Not one of the user's messages as the gateway sends them (a server fault, or something
      // else written to the inbox): told as one that will not arrive, not passed on.
      this.host.logger.warn({ seq: event.seq }, 'inbox message without a method: ignored');
      this.#gapSubject.next({ gap: 1 });
      return;
    }
    this.#dispatch(message.method, message.params as Params | undefined);
  }

  /** As the peer takes a plain notification: its handler if registered, then the stream. */
  #dispatch(method: string, params: Params | undefined): void {
    // `rpc.` notifications steer one connection (drain, cancel): never replayed from an inbox.
    if (isReservedMethod(method)) return;
    const handler = this.host.registry.get(method);
    if (handler) {
      const call = new RunningCall(this.host.session, this.host.logger, undefined, method);
      const failed = (err: unknown): void =>
        this.host.logger.warn({ err, method }, 'notification handler failed');
      try {
        const result: unknown = handler(params, call);
        if (isPromiseLike(result)) Promise.resolve(result).catch(failed);
      } catch (err) {
        failed(err);
      }
    }
    this.host.emit({ method, params });
  }
}

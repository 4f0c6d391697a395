// subscriptionStatus$(client, topic, params): where the client's subscription to a topic stands
// (connecting, subscribed, resuming after a lost connection, a gap, an error, closed), as an
// Observable beside its data. A function of its own rather than a method, so that an app that
// does not use it does not ship it: the manager (subscriptions.ts) only calls `onStatus` when
// an entry subscribes, is accepted or stops, and everything else is read here from the
// entry's fields, its messages, and the client's disconnects$.
import { Observable } from 'rxjs';
import type { Subscription } from 'rxjs';
import type { RpcClient } from './client.js';
import { canonicalJson } from './canonical-json.js';
import { managers } from './subscriptions.js';
import type { ClientSubscriptions, Shared } from './subscriptions.js';

export type SubscriptionStatusState =
  'connecting' | 'subscribed' | 'resuming' | 'gap' | 'error' | 'closed';

export interface SubscriptionStatus {
  state: SubscriptionStatusState;
  /** Set on 'error': the JsonRpcError or transport error that ended it. */
  error?: unknown;
  /**
   * Set on 'gap': how many messages this subscriber will not get: history no longer held them
   * after a resume (null: unknown how many), or the server skipped them for a slow consumer (told
   * with the message after them).
   */
  missed?: number | null;
  /** The topic's last sequence number seen, when the topic numbers its messages. */
  seq?: number;
}

/**
 * Entries seen accepted by any status observer: one of them without a server id again is
 * resuming, not connecting. (An entry first looked at while it resubscribes counts as seen
 * accepted when it holds a position: a topic's first reply is followed by one.)
 */
const accepted = new WeakSet<Shared>();
/** Each manager's status observers, all told by the one `onStatus` it calls. */
const watchers = new WeakMap<ClientSubscriptions, Set<() => void>>();

function watch(manager: ClientSubscriptions, check: () => void): () => void {
  let checks = watchers.get(manager);
  if (!checks) {
    const all = (checks = new Set());
    watchers.set(manager, all);
    manager.onStatus = () => {
      for (const each of [...all]) each();
    };
  }
  checks.add(check);
  const added = checks;
  return () => added.delete(check);
}

/** How an entry's messages ended: `{ error }`, `true` (completed), or false while they go on. */
function endOf(shared: Shared): { error: unknown } | boolean {
  let end: { error: unknown } | boolean = false;
  // An ended Hub tells a new observer at once how it ended; a live one tells nothing yet.
  shared.hub.observable
    .subscribe({ error: (error: unknown) => (end = { error }), complete: () => (end = true) })
    .unsubscribe();
  return end;
}

/**
 * Where the client's subscription to `topic` (with `params`: the entry `client.subscribe(topic,
 * params)` shares) stands, starting with its state now. Observing it never subscribes: with no
 * Observer of the topic's data it is 'closed' (and follows a later subscribe through
 * 'connecting'). 'subscribed' once the server accepted it; 'resuming' from the loss of the
 * connection (or a resubscribe that fills a hole in the sequence) until the server accepts it
 * again; 'gap' when messages were lost (`missed`: beyond history, or skipped by the server for a
 * slow consumer), then 'subscribed' again;
 * 'error' when the server refused it or a stream ended with an error (kept until a new
 * subscribe); 'closed' when unsubscribed, completed, or the client closed. Completes when the
 * client closes. A state is not repeated, a gap excepted.
 */
export function subscriptionStatus$(
  client: RpcClient,
  topic: string,
  params?: unknown,
): Observable<SubscriptionStatus> {
  return new Observable<SubscriptionStatus>((subscriber) => {
    const manager = managers.get(client);
    if (!manager) throw new TypeError('subscriptionStatus$ takes a client made by createClient');
    const key = canonicalJson(params === undefined ? [topic] : [topic, params]);
    let followed: Shared | undefined;
    let messages: Subscription | undefined;
    let last: SubscriptionStatusState | undefined;

    const tell = (status: SubscriptionStatus): void => {
      last = status.state;
      const seq = followed?.lastSeq;
      subscriber.next(seq === undefined || status.seq !== undefined ? status : { ...status, seq });
    };
    const move = (status: SubscriptionStatus): void => {
      if (status.state !== last) tell(status);
    };

    const check = (): void => {
      const current = manager.shared.get(key);
      if (current !== followed) {
        const before = followed;
        messages?.unsubscribe();
        messages = undefined;
        followed = current;
        if (current) {
          messages = current.hub.observable.subscribe({
            next: (event) => {
              const missed = event.gap === undefined ? event.missed : event.gap;
              if (missed === undefined || missed === 0) return;
              tell({ state: 'gap', missed });
              tell({ state: 'subscribed' });
            },
            error: (error: unknown) => move({ state: 'error', error }),
          });
        } else if (before) {
          // The entry went away: its messages may have ended with an error this observer has
          // not been told of yet (its data observers are told first).
          const end = endOf(before);
          if (typeof end === 'object') return move({ state: 'error', error: end.error });
        }
      }
      if (!current) {
        // An error stays the last word until a new subscribe.
        if (last !== 'error') move({ state: 'closed' });
        return;
      }
      if (current.serverId !== undefined) {
        accepted.add(current);
        return move({ state: 'subscribed' });
      }
      move({
        state: accepted.has(current) || current.lastSeq !== undefined ? 'resuming' : 'connecting',
      });
    };

    const unwatch = watch(manager, check);
    check();
    // A lost connection: the manager dropped the server ids just before this is told.
    const ends = client.disconnects$.subscribe({
      next: check,
      complete: () => {
        check();
        subscriber.complete();
      },
    });
    return () => {
      unwatch();
      ends.unsubscribe();
      messages?.unsubscribe();
    };
  });
}

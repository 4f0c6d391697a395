import type { Observable } from 'rxjs';
import { through } from '../peer/hub.js';
import type { SubscriptionEvent } from './subscriptions.js';

/**
 * The messages of a subscription's events (`subscribeWithMeta`'s), its gap signals left out:
 * what `subscribe` gives, on the client and the shared client alike. Gaps are told by
 * `subscribeWithMeta` and `subscriptionStatus$`.
 */
export function messagesOf<T>(events: Observable<SubscriptionEvent<T>>): Observable<T> {
  return through(events, (to) => (event) => {
    if (event.gap === undefined) to.next(event.data);
  });
}

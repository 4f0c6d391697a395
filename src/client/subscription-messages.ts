import type { Observable } from 'rxjs';
import { through } from '../peer/hub.js';
import type { SubscriptionEvent } from './subscriptions.js';

/**
 * The messages of a subscription's events (`subscribeWithMeta`'s), its gap signals left out:
 * what the shared client's `subscribe` gives (RpcClient's filters them where its subscriptions
 * hold them: ClientSubscriptions.observeMessages). Gaps are told by `subscribeWithMeta` and
 * `subscriptionStatus$`.
 */
export function messagesOf<T>(events: Observable<SubscriptionEvent<T>>): Observable<T> {
  return through(events, (to) => (event) => {
    if (event.gap === undefined) to.next(event.data);
  });
}

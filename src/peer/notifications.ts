import type { Observable } from 'rxjs';
import type { Params } from '../protocol/types.js';
import { through } from './hub.js';
import { nameOf } from './method-descriptor.js';
import type { NotificationDescriptor } from './method-descriptor.js';

export interface IncomingNotification {
  method: string;
  params: Params | undefined;
}

/** The params of one method's notifications, out of a stream of all of them. */
export function notificationsNamed<P extends Params | undefined>(
  all: Observable<IncomingNotification>,
  descriptor: NotificationDescriptor<P> | string,
): Observable<P> {
  const name = nameOf(descriptor);
  return through(all, (to) => (n) => n.method === name && to.next(n.params as P));
}

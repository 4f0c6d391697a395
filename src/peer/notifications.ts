import { filter, map } from 'rxjs';
import type { Observable } from 'rxjs';
import type { Params } from '../protocol/types.js';
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
  return all.pipe(
    filter((n) => n.method === name),
    map((n) => n.params as P),
  );
}

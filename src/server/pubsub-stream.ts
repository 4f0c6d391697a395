// Running one per-subscriber stream: the handler's Observable feeds a Delivery from the
// subscribe reply on, and its error or completion becomes the stream's final notification.
// Apart from the service because it is about the Observable's life, not about subscribing.
import type { Observable, Subscription } from 'rxjs';
import { assertEncodable } from '../encoding/encoded-depth.js';
import type { HandlerContext } from '../peer/handler-context.js';
import { JsonRpcError, toWireError } from '../protocol/errors.js';
import type { Delivery } from '../pubsub/delivery.js';
import { finalTail, messageTail } from '../pubsub/frames.js';
import type { SessionSubscription, SessionTable } from './pubsub-types.js';
import type { Session } from './session.js';
import type { StandsFor } from './stream-context.js';

export interface StreamStart<C> {
  session: Session<C>;
  table: SessionTable;
  /** The subscription id the subscribe reply carries. */
  id: string;
  delivery: Delivery;
  source: Observable<unknown>;
  ctx: HandlerContext<Session<C>>;
  exposeErrorDetails: boolean;
  /** Called once when the stream is over: ended, failed, unsubscribed or its connection closed. */
  onEnd: () => void;
  /** The topic it stands for (`$presence`), weighed again after a refresh; undefined: kept. */
  standsFor: StandsFor | undefined;
}

/** Enter the stream in the session's table and subscribe its source once the reply is sent. */
export function attachStream<C>({
  session,
  table,
  id,
  delivery,
  source,
  ctx,
  exposeErrorDetails,
  onEnd,
  standsFor,
}: StreamStart<C>): void {
  let running: Subscription | undefined;
  let ended = false;
  const subscription: SessionSubscription = {
    topic: undefined,
    ...(standsFor && { standsFor }),
    delivery,
    teardown: () => {
      ended = true;
      delivery.stop();
      running?.unsubscribe();
      onEnd();
    },
  };
  const end = (tail: string): void => {
    if (ended) return;
    ended = true;
    delivery.finish(tail);
    if (table.subscriptions.get(id) === subscription) table.subscriptions.delete(id);
    onEnd();
  };
  table.subscriptions.set(id, subscription);
  ctx.afterReply(() => {
    if (ended) return;
    running = source.subscribe({
      next: (value) => {
        let payload: string;
        try {
          payload = JSON.stringify(value === undefined ? null : value);
          // Held to the bound publish's data is, so no subscriber's encoder is handed a value it
          // cannot write (which would close a MessagePack or CBOR connection 1011).
          assertEncodable(payload, 'stream value');
        } catch (err) {
          session.logger.warn({ err }, 'stream value cannot be sent; ending the stream');
          end(finalTail(toWireError(err, exposeErrorDetails)));
          running?.unsubscribe();
          return;
        }
        delivery.offer(messageTail(payload));
      },
      error: (err: unknown) => {
        if (!(err instanceof JsonRpcError)) session.logger.warn({ err }, 'stream failed');
        end(finalTail(toWireError(err, exposeErrorDetails)));
      },
      complete: () => end(finalTail()),
    });
    if (ended) running.unsubscribe();
  });
}

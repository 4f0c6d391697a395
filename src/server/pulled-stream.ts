import { Observable, from } from 'rxjs';
import { SseTransport } from '../transport/sse-transport.js';
import type { Session } from './session.js';

/** What a pulled stream waits on: the subscriber's socket. */
export interface PullGate {
  readonly bufferedAmount: number;
  /** Call `listener` once the write buffer has emptied; returns a function that cancels it. */
  onDrain(listener: () => void): () => void;
}

/**
 * What a session's pulled streams wait on: what it holds back for the client (held output while
 * its identity is refreshed) and what its socket has not sent. An event stream between a drop
 * and its resume has no socket: what it sent meanwhile waits in its replay buffer, which counts
 * instead, and a generator past the mark waits for the resume; else it would run on unpaced (a
 * generator that awaits nothing real, without end, in microtasks that hold the event loop) and
 * what it made past the replay buffer's bound would be lost.
 */
export function pullGateOf<C>(session: Session<C>): PullGate {
  const { transport } = session;
  if (!(transport instanceof SseTransport)) return session;
  return {
    get bufferedAmount(): number {
      return transport.streaming
        ? session.bufferedAmount
        : session.bufferedAmount + transport.replayKeptBytes;
    },
    onDrain: (listener) =>
      transport.streaming ? session.onDrain(listener) : transport.onStreamBack(listener),
  };
}

/**
 * A stream handler's result as an Observable. An async iterable (an `async function*`) is pulled
 * only while its subscriber's socket holds less than `highWaterMark` unsent: past it, the next
 * value is asked for once the socket has drained, so a generator that outruns its subscriber is
 * slowed down rather than have its values skipped by the slow-consumer policy. Anything else
 * goes through rxjs's `from` (an Observable pushes at its own pace and meets the policy).
 */
export function pulledSource(
  returned: unknown,
  gate: PullGate,
  highWaterMark: number,
): Observable<unknown> {
  if (!isAsyncIterable(returned)) return from(returned as Parameters<typeof from>[0]);
  return new Observable<unknown>((subscriber) => {
    const iterator = returned[Symbol.asyncIterator]();
    let stopped = false;
    let cancelDrain: (() => void) | undefined;
    const room = (): Promise<void> | undefined =>
      gate.bufferedAmount < highWaterMark
        ? undefined
        : new Promise<void>((resolve) => (cancelDrain = gate.onDrain(resolve)));
    const pull = async (): Promise<void> => {
      try {
        for (;;) {
          const waiting = room();
          if (waiting) await waiting;
          cancelDrain = undefined;
          if (stopped) return;
          const next = await iterator.next();
          if (stopped) return;
          if (next.done) return subscriber.complete();
          subscriber.next(next.value);
        }
      } catch (err) {
        if (!stopped) subscriber.error(err);
      }
    };
    void pull();
    return () => {
      stopped = true;
      cancelDrain?.();
      // The generator's finally blocks run (after a pending next(), as async generators queue).
      void Promise.resolve(iterator.return?.()).catch(() => undefined);
    };
  });
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function'
  );
}

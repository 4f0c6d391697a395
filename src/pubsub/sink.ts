import type { EncodedFrame } from '../transport/transport.js';

/** Where a subscription's frames go: one connection, seen only as much as fan-out needs. */
export interface Sink {
  /**
   * An EncodedFrame is one message encoded once for many sinks; send it as a text frame. `from`:
   * the subscription's delivery that wrote it, so that what a sink holds back for one that ends
   * before it is sent can be given up (see Session.discardHeld).
   */
  send(frame: string | EncodedFrame, from?: object): void;
  /** Bytes written but not yet on the network. */
  readonly bufferedAmount: number;
  close(code: number, reason: string): void;
  /** Call `listener` once the socket's write buffer has emptied; returns a function that cancels. */
  onDrain(listener: () => void): () => void;
  /**
   * The session the sink is (a gateway's sink is its session): a message published `except`
   * it passes its subscriptions by. Undefined for a sink that is no session's.
   */
  readonly id?: string;
}

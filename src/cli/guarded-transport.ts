import { exceedsDepth } from '../protocol/safe-json.js';
import type { Transport, TransportListener } from '../transport/transport.js';
import { keepNumbers, writeKeptNumbers } from './kept-numbers.js';
import { MAX_DEPTH } from './limits.js';
import { malformedFrame, parsedOrNot } from './response-shape.js';

/** The frame being handled: how many came so far, and its text (empty between frames). */
export interface FrameMeter {
  readonly frames: number;
  readonly text: string;
}

/** What the guarded transport tells of a frame it refused (and after which it hands on nothing). */
export interface Refusals {
  /** Nested deeper than MAX_DEPTH. */
  tooDeep(): void;
  /** Not a JSON-RPC 2.0 response, call or notification (malformedFrame): `reason`, and its text. */
  malformed(reason: string, text: string): void;
}

/**
 * The CLI's transport, between the socket's and its Peer: a message nested deeper than
 * MAX_DEPTH never reaches the Peer (whose parse, and the printing after it, would recurse that
 * deep), nor does one that is no JSON-RPC message (malformedFrame); `refuse` is told instead,
 * and nothing more is handed on. A number a double cannot hold
 * reaches the Peer as a marked string (keepNumbers), and goes back to the server as the number it
 * stands for (a numeric subscription id in an unsubscribe). It also meters the frame being
 * handled (as the server sent it), so `subscribe` can count the text of what it keeps.
 */
export class GuardedTransport implements Transport, FrameMeter {
  frames = 0;
  text = '';
  private refused = false;

  constructor(
    private readonly inner: Transport,
    private readonly refuse: Refusals,
  ) {}

  get bufferedAmount(): number {
    return this.inner.bufferedAmount;
  }

  send(frame: string): void {
    this.inner.send(writeKeptNumbers(frame));
  }

  close(code?: number, reason?: string): void {
    this.inner.close(code, reason);
  }

  listen(listener: TransportListener): void {
    this.inner.listen({
      receive: (text) => {
        if (this.refused) return;
        if (exceedsDepth(text, MAX_DEPTH)) {
          this.refused = true;
          this.refuse.tooDeep();
          return;
        }
        const kept = keepNumbers(text);
        // Parsed here and again by the Peer (which takes text): the price of looking first.
        const malformed = malformedFrame(parsedOrNot(kept));
        if (malformed !== undefined) {
          this.refused = true;
          this.refuse.malformed(malformed, text);
          return;
        }
        this.frames++;
        // Held only while the frame is handled: a large one is not kept alive after.
        this.text = text;
        try {
          listener.receive(kept);
        } finally {
          this.text = '';
        }
      },
      transportClosed: (code, reason) => listener.transportClosed(code, reason),
    });
  }
}

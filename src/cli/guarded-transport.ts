import { exceedsDepth } from '../protocol/safe-json.js';
import type { Transport, TransportListener } from '../transport/transport.js';
import { keepNumbers, writeKeptNumbers } from './kept-numbers.js';
import { MAX_DEPTH } from './limits.js';

/** The frame being handled: how many came so far, and its text (empty between frames). */
export interface FrameMeter {
  readonly frames: number;
  readonly text: string;
}

/**
 * The CLI's transport, between the socket's and its Peer: a message nested deeper than
 * MAX_DEPTH never reaches the Peer (whose parse, and the printing after it, would recurse that
 * deep), `refuse` is told instead, and nothing more is handed on. A number a double cannot hold
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
    private readonly refuse: () => void,
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
          this.refuse();
          return;
        }
        this.frames++;
        // Held only while the frame is handled: a large one is not kept alive after.
        this.text = text;
        try {
          listener.receive(keepNumbers(text));
        } finally {
          this.text = '';
        }
      },
      transportClosed: (code, reason) => listener.transportClosed(code, reason),
    });
  }
}

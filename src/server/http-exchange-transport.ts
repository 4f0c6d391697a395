import { countOutput, outputSpent } from '../transport/input-turns.js';
import type { ServerTransport, TransportListener } from '../transport/transport.js';

/** Where an exchange's extra costs go: its address's byte bucket (limits.bytesPerSecondPerIp). */
export interface ByteCharge {
  spend(bytes: number): number;
}

/**
 * The transport of one HTTP exchange (a JSON-RPC POST, a server API request): the reply travels
 * in the HTTP response (the peer's `answer`), so nothing is ever sent on it, and nothing can be
 * pushed (`canPush` false).
 */
export class HttpExchangeTransport implements ServerTransport {
  readonly kind = 'http';
  readonly canPush = false;
  readonly bufferedAmount = 0;

  constructor(
    /**
     * The address's byte bucket: what chargeBytes spends from (the bucket going into debt, so
     * the address's next POST waits for the refill or is refused 429). Undefined: no budget.
     */
    private readonly charged?: ByteCharge,
    /** limits.messageCostBytes: what each member of a batch after the first costs. */
    private readonly messageCostBytes = 0,
  ) {}

  send(): void {}
  close(): void {}
  listen(_listener: TransportListener): void {}
  onDrain(listener: () => void): () => void {
    const timer = setTimeout(listener, 0);
    return () => clearTimeout(timer);
  }

  /** Transport.chargeMessages: a batch's members after the first, as a WebSocket's cost. */
  chargeMessages(count: number): void {
    this.charged?.spend(count * this.messageCostBytes);
  }

  /** Transport.chargeBytes: work done for the exchange (params validation) as bytes read. */
  chargeBytes(bytes: number): void {
    this.charged?.spend(bytes);
  }

  /**
   * Transport.outputWaits: whether the turn's output is spent, so that a batch's members are
   * made as its reply is written (writeReply) rather than now.
   */
  outputWaits(): boolean {
    return outputSpent();
  }

  /** Transport.chargeOutput: a batch member's reply made ahead of its write. */
  chargeOutput(chars: number): void {
    countOutput(chars);
  }
}

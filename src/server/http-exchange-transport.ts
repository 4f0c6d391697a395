import type { ServerTransport, TransportListener } from '../transport/transport.js';

/**
 * The transport of one HTTP exchange (a JSON-RPC POST, a server API request): the reply travels
 * in the HTTP response (the peer's `answer`), so nothing is ever sent on it, and nothing can be
 * pushed (`canPush` false).
 */
export class HttpExchangeTransport implements ServerTransport {
  readonly kind = 'http';
  readonly canPush = false;
  readonly bufferedAmount = 0;
  send(): void {}
  close(): void {}
  listen(_listener: TransportListener): void {}
  onDrain(listener: () => void): () => void {
    const timer = setTimeout(listener, 0);
    return () => clearTimeout(timer);
  }
}

import { WebSocket } from 'ws';

/** A WebSocket class for a client's options that counts the sockets made with it. */
export function countedWebSocket(): {
  WebSocket: new (address: string, protocols?: string | string[]) => WebSocket;
  made: () => number;
} {
  let made = 0;
  class CountedWebSocket extends WebSocket {
    constructor(address: string, protocols?: string | string[]) {
      super(address, protocols);
      made++;
    }
  }
  return { WebSocket: CountedWebSocket, made: () => made };
}

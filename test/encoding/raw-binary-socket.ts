import type { WebSocket } from 'ws';
import type { Resources } from '../support/resources.js';
import { openSocket } from '../support/sockets.js';

/** One message as it arrived: its frame type, its bytes and its value. */
export interface RawArrival {
  binary: boolean;
  bytes: Buffer;
  value: unknown;
}

/**
 * A raw `ws` socket (tracked by `res`) offering `protocols`, every binary message decoded with
 * `decode` (a text message is JSON), read in order with `next()`.
 */
export async function rawBinarySocket(
  res: Resources,
  url: string,
  protocols: string[],
  decode?: (bytes: Uint8Array) => unknown,
): Promise<{ socket: WebSocket; inbox: RawArrival[]; next(): Promise<RawArrival> }> {
  const socket = await openSocket(res, url, protocols);
  const inbox: RawArrival[] = [];
  const waiters: (() => void)[] = [];
  socket.on('message', (bytes: Buffer, binary: boolean) => {
    const value = binary && decode ? decode(bytes) : JSON.parse(bytes.toString('utf8'));
    inbox.push({ binary, bytes, value });
    for (const wake of waiters.splice(0)) wake();
  });
  return {
    socket,
    inbox,
    async next(): Promise<RawArrival> {
      while (inbox.length === 0) await new Promise<void>((wake) => waiters.push(wake));
      return inbox.shift()!;
    },
  };
}

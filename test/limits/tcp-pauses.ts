import type { Socket } from 'node:net';
import type { Gateway } from '../../src/server/gateway.js';
import { waitUntil } from '../support/waiting.js';

/**
 * The gateway's only TCP session, once it is there, with its transport's input watched: `count()`
 * is how often reading it was paused since (by the input budget, or for its output).
 */
export async function watchTcpPauses(gateway: Gateway): Promise<{ count: () => number }> {
  await waitUntil(() => gateway.sessions.size === 1, 'the session');
  const session = [...gateway.sessions.values()][0]!;
  const readable = (session.transport as unknown as { readable: Socket }).readable;
  let pauses = 0;
  const pause = readable.pause.bind(readable);
  readable.pause = () => {
    pauses++;
    return pause();
  };
  return { count: () => pauses };
}

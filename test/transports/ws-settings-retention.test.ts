import { describe, expect, it } from 'vitest';
import { SharedDeflate } from '../../src/transport/deflate-frames.js';
import { WsTransport } from '../../src/transport/ws-transport.js';
import type { TransportSocket } from '../../src/transport/ws-transport.js';
import { fullGc } from '../support/heap.js';

/*
 * WsTransport shares one settings object among the transports a gateway makes. Those settings
 * (its message counters, its broadcast compressor) must go with the gateway: nothing kept at
 * module level may hold them once every transport made with them is gone.
 */

interface Held {
  counters: WeakRef<object>;
  deflate: WeakRef<object>;
}

/** A transport made and dropped, as a closed gateway's last connection is; weak refs to its settings. */
function makeAndDrop(): Held {
  const counters = { messagesIn: 0, messagesOut: 0 };
  const deflate = new SharedDeflate({ threshold: 1024, level: 1, memLevel: 8 });
  const socket = {} as unknown as TransportSocket;
  const transport = new WsTransport(socket, counters, 2_000, 0, deflate);
  expect(transport.socket).toBe(socket);
  return { counters: new WeakRef(counters), deflate: new WeakRef(deflate) };
}

async function collect(): Promise<void> {
  // A WeakRef's target is kept until the task that made or read it is over.
  for (let i = 0; i < 3; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    fullGc(1);
  }
}

describe('WsTransport settings', () => {
  it('are released once the transports made with them are gone', async () => {
    const held = makeAndDrop();
    await collect();
    expect(held.counters.deref()).toBeUndefined();
    expect(held.deflate.deref()).toBeUndefined();
  });

  it('are shared by the transports made with the same ones', () => {
    const counters = { messagesIn: 0, messagesOut: 0 };
    const a = new WsTransport({} as unknown as TransportSocket, counters, 2_000, 0);
    const b = new WsTransport({} as unknown as TransportSocket, counters, 2_000, 0);
    const sharedOf = (t: WsTransport): unknown => (t as unknown as { shared: unknown }).shared;
    expect(sharedOf(a)).toBe(sharedOf(b));
    const other = new WsTransport({} as unknown as TransportSocket, counters, 1_000, 0);
    expect(sharedOf(other)).not.toBe(sharedOf(a));
  });
});

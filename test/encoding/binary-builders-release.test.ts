/**
 * A gateway with a binary encoding has codecs of its own (withValueCap: its maxJsonValues), and
 * the WebSocket transport keeps, per codec, the builders of its fan-out frames. Once the gateway
 * is closed nothing keeps those codecs: a process that makes and closes gateways (tests, a
 * server restarted in place) does not keep one set per gateway it ever ran.
 */
import { expect, it } from 'vitest';
import type { WireCodec } from '../../src/encoding/codec.js';
import { msgpack } from '../../src/msgpack.js';
import { silentLogger } from '../../src/peer/logger.js';
import { createGateway } from '../../src/server/gateway.js';
import { fullGc } from '../support/heap.js';
import { Resources } from '../support/resources.js';
import { closeOf, openSocket } from '../support/sockets.js';
import { within } from '../support/waiting.js';

/** What a gateway's intake holds of its codecs, by subprotocol (read through its privates). */
interface WithIntake {
  intake: { codecsLoaded: Promise<ReadonlyMap<string, WireCodec>> };
}

/**
 * Run a gateway whose MessagePack connection is sent a reply and a topic message (so its codec
 * gets its fan-out builders), close it, and hand back a weak reference to that codec alone.
 */
async function codecOfClosedGateway(): Promise<WeakRef<WireCodec>> {
  const resources = new Resources();
  const gateway = createGateway({
    logger: silentLogger,
    heartbeatIntervalMs: 0,
    encodings: ['json', 'msgpack'],
  });
  try {
    gateway.topic('news');
    const { port } = await gateway.listen(0, '127.0.0.1');
    const codec = (await (gateway as unknown as WithIntake).intake.codecsLoaded).get(
      msgpack.subprotocol,
    )!;
    // The gateway's own, not the module's: it is what the builders are kept for.
    expect(codec).not.toBe(msgpack);
    const socket = await openSocket(resources, `ws://127.0.0.1:${port}/rpc`, [msgpack.subprotocol]);
    const arrivals: Buffer[] = [];
    const waiters: (() => void)[] = [];
    socket.on('message', (bytes: Buffer) => {
      arrivals.push(bytes);
      for (const wake of waiters.splice(0)) wake();
    });
    const arrived = async (count: number): Promise<void> => {
      while (arrivals.length < count) await new Promise<void>((wake) => waiters.push(wake));
    };
    socket.send(msgpack.encode({ jsonrpc: '2.0', id: 1, method: 'subscribe', params: ['news'] }));
    await within(arrived(1), 'subscribed');
    await gateway.publish('news', { n: 1 });
    await within(arrived(2), 'the topic message');
    expect(msgpack.decode(arrivals[1]!)).toMatchObject({ params: { result: { n: 1 } } });
    const closed = closeOf(socket);
    await gateway.close({ timeoutMs: 0 });
    await within(closed, 'the socket closes');
    return new WeakRef(codec);
  } finally {
    await resources.cleanup();
  }
}

it("a closed gateway's codec, with its fan-out builders, is not kept", async () => {
  const ref = await codecOfClosedGateway();
  // Collected once nothing holds it: after this turn (a WeakRef keeps its target to the end of
  // the job that read it) and once the server's side of the socket has closed, which on a loaded
  // machine may take a while. What keeps it for good keeps it through every round of 10 s.
  const deadline = Date.now() + 10_000;
  do {
    await new Promise((resolve) => setTimeout(resolve, 20));
    fullGc(3);
  } while (ref.deref() !== undefined && Date.now() < deadline);
  expect(ref.deref()).toBeUndefined();
});

/**
 * A node that starts listening while its broker link is down (a restart during a broker outage):
 * `gateway.listen()` resolves, `/readyz` answers 503 `broker-unavailable` while the node cannot
 * hear what other nodes send it, and once the link is back the node subscribes its own topic:
 * a `notifySession` from another node reaches a session of it. Node B
 * reaches a private redis-server or nats-server through a TCP relay cut before it listens.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Broker, BrokerMessage } from '../../src/pubsub/broker.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { CutLinkNodes } from '../support/cut-broker-link.js';
import { attemptUpgrade, openSocket } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const options = (broker: Broker): GatewayOptions<unknown> => ({ broker });
const nodes = new CutLinkNodes('wsrpcstartcut', options);
const res = nodes.res;

afterEach(() => nodes.cleanup());
afterAll(() => nodes.stop());

nodes.describeEachBroker('a node started with its broker link down', (kind) => {
  it('listens, is not ready until it hears its own topic, then gets what other nodes send it', async () => {
    const { a, b, brokerB, relay } = await nodes.twoNodesBStartedCut(kind);
    const readyz = await fetch(`${b.httpUrl}/readyz`);
    expect({ status: readyz.status, body: await readyz.text() }).toMatchObject({
      status: 503,
      body: expect.stringContaining('broker-unavailable') as unknown,
    });

    await relay.restore();
    await waitUntil(() => brokerB.ready && b.gateway.isReady, 'node B ready once its link is back');
    expect((await fetch(`${b.httpUrl}/readyz`)).status).toBe(200);

    const socket = await openSocket(res, b.url);
    const frames: unknown[] = [];
    socket.on('message', (data) => frames.push(JSON.parse((data as Buffer).toString('utf8'))));
    const [sessionId] = [...b.gateway.sessions.keys()];

    expect(await a.gateway.notifySession(sessionId!, 'hello', ['from A'])).toBe(true);
    await waitUntil(() => frames.length > 0, "A's notification on B's session");
    expect(frames).toEqual([{ jsonrpc: '2.0', method: 'hello', params: ['from A'] }]);
  });
});

/** A broker that is up but refuses this node's own topic until told to take it. */
class RefusingNodeTopic extends MemoryBroker {
  refuse = true;
  override subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void> {
    if (this.refuse && topic.startsWith('$node.')) {
      return Promise.reject(new Error('refused for the test'));
    }
    return super.subscribe(topic, deliver);
  }
}

describe("a node whose broker is up but has not taken the node's own topic", () => {
  it('is not ready and refuses upgrades, then takes them once the broker has it', async () => {
    const broker = new RefusingNodeTopic();
    const { gateway, url, httpUrl } = await res.gateway({ broker });
    expect(broker.ready).toBe(true);
    const readyz = await fetch(`${httpUrl}/readyz`);
    expect({ status: readyz.status, body: await readyz.text() }).toMatchObject({
      status: 503,
      body: expect.stringContaining('broker-unavailable') as unknown,
    });
    expect(await attemptUpgrade(res, url)).toBe(503);

    broker.refuse = false;
    await waitUntil(() => gateway.isReady, 'the node ready once its topic is taken');
    expect(await attemptUpgrade(res, url)).toBe('open');
  });
});

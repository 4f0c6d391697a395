/**
 * The HTTP streaming fallback behind nginx as deploy/nginx.conf configures it, in front of two
 * gateways sharing Redis (in this process, so a test can reach a session's stream): a Node
 * client on fallbackSocket whose WebSocket cannot open runs calls, a subscription fed from the
 * other gateway and a server-to-client call over the event stream and POSTs through nginx; the
 * stream's connection between nginx and the gateway is cut, again and again, and the client
 * resumes it by Last-Event-ID on the same session: every published message arrives, in order,
 * once, and its POSTs still reach the node that holds the session.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, onTestFailed } from 'vitest';
import { fallbackSocket } from '../../src/client/sse-transport.js';
import { silentLogger } from '../../src/peer/logger.js';
import { createGateway } from '../../src/server/gateway.js';
import type { Gateway } from '../../src/server/gateway.js';
import { RedisBroker } from '../../src/redis.js';
import { REDIS_URL } from '../support/brokers.js';
import { Cluster, Subscriber, sequenceProblem } from '../support/cluster.js';
import type { Expected } from '../support/cluster.js';
import { inCi, root } from '../support/environment.js';
import { canConnect, freePort } from '../support/network.js';
import { findNginx, renderNginxSite, startNginx } from '../support/server-processes.js';
import { settle, waitFor } from '../support/waiting.js';

const redisUp = await canConnect(6379);
const nginxBin = findNginx();
const skip = (!nginxBin || !redisUp) && !inCi;
if (skip) console.warn('Skipping the fallback through nginx: no nginx binary, or no Redis');

/** A WebSocket class whose constructor throws, as where WebSocket is blocked. */
class BlockedWebSocket {
  constructor() {
    throw new Error('WebSocket is blocked here');
  }
}

interface Node {
  name: string;
  gateway: Gateway;
  port: number;
}

let cluster: Cluster | undefined;
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await cluster?.cleanup();
  cluster = undefined;
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
});

/** A gateway node in this process on Redis under the cluster's prefix. */
async function startNode(c: Cluster, name: string): Promise<Node> {
  const broker = await RedisBroker.create({ url: REDIS_URL, prefix: `${c.prefix}:` });
  const gateway = createGateway({
    broker,
    logger: silentLogger,
    heartbeatIntervalMs: 0,
    routes: { events: '/rpc/events' },
  });
  closers.push(async () => {
    await gateway.close({ timeoutMs: 1_000 });
    await broker.close();
  });
  gateway.topic('feed', { history: { maxLength: 1_000 } });
  gateway.method('node.name', () => name);
  gateway.method('ask', async (_params, ctx) => ctx.session.call('client.name', []));
  const { port } = await gateway.listen(0, '127.0.0.1');
  return { name, gateway, port };
}

/** The requests the client's fetch made, and the Last-Event-ID of each stream it opened. */
function recordingFetch() {
  const requests: { method: string; lastEventId: string | undefined }[] = [];
  const recording = (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const headers = new Headers(init?.headers);
    requests.push({
      method: init?.method ?? 'GET',
      lastEventId: headers.get('last-event-id') ?? undefined,
    });
    return fetch(input, init);
  };
  return { fetch: recording as typeof fetch, requests };
}

/** The session's stream as the gateway writes it (its response, on the socket from nginx). */
function streamOf(gateway: Gateway): { destroy(): void } | undefined {
  const [session] = [...gateway.sessions.values()];
  return (session?.transport as unknown as { stream?: { destroy(): void } } | undefined)?.stream;
}

describe.skipIf(skip)('the HTTP streaming fallback through nginx (deploy/nginx.conf)', () => {
  it('keeps one session through cut streams: calls, a subscription fed from the other node, a server-to-client call', async () => {
    const c = new Cluster('', 'redis');
    cluster = c;
    onTestFailed(() => console.error(`nginx and the gateways:\n${c.outputs()}`));
    const nodes = [await startNode(c, 'A'), await startNode(c, 'B')];
    const listen = await freePort();
    const site = renderNginxSite(
      readFileSync(join(root, 'deploy/nginx.conf'), 'utf8'),
      nodes.map((node) => node.port),
      listen,
    );
    await startNginx(c, nginxBin ?? 'nginx', c.tempDir(), site, listen);

    const { fetch: recording, requests } = recordingFetch();
    const client = c.client(`ws://127.0.0.1:${listen}/rpc`, {
      WebSocket: fallbackSocket({ WebSocket: BlockedWebSocket, fetch: recording }),
    });
    client.method('client.name', () => 'behind nginx');
    const name = (await client.call('node.name')) as string;
    const here = nodes.find((node) => node.name === name)!;
    const other = nodes.find((node) => node.name !== name)!;
    expect(here).toBeDefined();
    expect([...here.gateway.sessions.values()].map((s) => s.transport.kind)).toEqual(['sse']);
    expect(other.gateway.sessions.size).toBe(0);
    const [sessionId] = [...here.gateway.sessions.keys()];
    expect(await client.call('ask')).toBe('behind nginx');

    const subscriber = new Subscriber('sse via nginx', client);
    await waitFor(() => here.gateway.pubsub.topics()['feed'] === 1, 'the subscription on its node');
    const expected: Expected[] = [];
    const publish = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i++) {
        const data = { i: expected.length + 1, via: other.name };
        expected.push({ seq: await other.gateway.publish('feed', data), data });
      }
    };

    await publish(10);
    await waitFor(() => subscriber.events.length >= 10, 'the first ten messages');
    const cuts = 3;
    for (let cut = 1; cut <= cuts; cut++) {
      const stream = streamOf(here.gateway);
      expect(stream, 'the session has its stream').toBeDefined();
      // Cut the connection nginx holds to the gateway for this stream, with messages on the way.
      const during = publish(10);
      stream!.destroy();
      await during;
      await waitFor(
        () => requests.filter((r) => r.method === 'GET' && r.lastEventId).length >= cut,
        `resume ${cut}, by Last-Event-ID`,
      );
      await publish(5);
      // POSTs still reach the node that holds the session, and answer on its stream.
      expect(await client.call('node.name')).toBe(here.name);
      expect(await client.call('ask')).toBe('behind nginx');
    }
    await settle(() => subscriber.events.length >= expected.length);
    expect(sequenceProblem(subscriber.events, expected)).toBeUndefined();
    expect(subscriber.errors).toEqual([]);
    expect(expected).toHaveLength(10 + cuts * 15);
    // One session all along, on the node that opened it.
    expect([...here.gateway.sessions.keys()]).toEqual([sessionId]);
    expect(other.gateway.sessions.size).toBe(0);
    expect(client.lastDisconnect, 'the client never saw its connection end').toBeUndefined();
  }, 60_000);
});

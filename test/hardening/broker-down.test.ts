/**
 * A gateway whose broker is down refuses new WebSocket upgrades and TCP connections with 503
 * + Retry-After (a load balancer that does not poll /readyz then retries another node), and
 * /readyz says why; sessions already open stay and keep working.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryBroker } from '../../src/index.js';
import type { Broker, BrokerMessage, History, Retention } from '../../src/index.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { Resources } from '../support/resources.js';
import { deferred } from '../support/promises.js';
import { upgradeRefusal } from '../support/sockets.js';
import { canConnect, freePort } from '../support/network.js';
import { waitUntil } from '../support/waiting.js';
import { attemptUpgrade, openRaw } from '../support/sockets.js';
import { killChild } from '../support/processes.js';

const res = new Resources();
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  await res.cleanup();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A MemoryBroker whose readiness the test switches: what a broker that lost its server reports. */
class SwitchableBroker implements Broker {
  private readonly inner = new MemoryBroker();
  up = true;
  get ready(): boolean {
    return this.up && this.inner.ready;
  }
  publish(topic: string, payload: string, retention?: Retention): Promise<number> {
    if (!this.up) return Promise.reject(new Error('broker down'));
    return this.inner.publish(topic, payload, retention);
  }
  subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void> {
    return this.inner.subscribe(topic, deliver);
  }
  unsubscribe(topic: string): Promise<void> {
    return this.inner.unsubscribe(topic);
  }
  history(topic: string, afterSeq: number): Promise<History> {
    return this.inner.history(topic, afterSeq);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

async function readyz(httpUrl: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${httpUrl}/readyz`);
  return { status: response.status, body: await response.json() };
}

async function sumGateway(broker: Broker, options: Parameters<Resources['gateway']>[0] = {}) {
  cleanups.push(() => broker.close());
  const running = await res.gateway({ broker, ...options });
  running.gateway.method('sum', (params) => (params as number[]).reduce((a, b) => a + b, 0));
  return running;
}

/** The first line a TCP connection to `port` gets (a refusal line, if refused). */
function firstTcpLine(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    cleanups.push(() => socket.destroy());
    let text = '';
    socket.setEncoding('utf8');
    socket.on('error', reject);
    socket.on('data', (chunk: string) => {
      text += chunk;
      if (text.includes('\n')) resolve(text.split('\n', 1)[0]!);
    });
    socket.once('connect', () =>
      socket.write('{"jsonrpc":"2.0","method":"sum","params":[1,2],"id":1}\n'),
    );
  });
}

describe('broker down', () => {
  it('new upgrades get 503 + Retry-After, /readyz says broker-unavailable, open sessions carry on', async () => {
    const broker = new SwitchableBroker();
    const { gateway, url, httpUrl } = await sumGateway(broker);
    const { port: tcpPort } = await gateway.listenTcp(0, '127.0.0.1');
    const open = await openRaw(res, url);
    expect(await readyz(httpUrl)).toEqual({ status: 200, body: { status: 'ready', sessions: 1 } });

    broker.up = false;
    const refusal = await upgradeRefusal(res, url);
    expect(refusal.status).toBe(503);
    expect(refusal.headers['retry-after']).toBeDefined();
    expect(await readyz(httpUrl)).toEqual({
      status: 503,
      body: { status: 'broker-unavailable', sessions: 1 },
    });
    const line = JSON.parse(await firstTcpLine(tcpPort)) as { error: { data: unknown } };
    expect(line).toMatchObject({ id: null, error: { code: -32009, data: { status: 503 } } });
    // The open session is not touched.
    expect((await open.request('sum', [1, 2])).result).toBe(3);
    // HTTP POST is served as usual (a publish among its calls would fail with -32009).
    const post = await fetch(`${httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"jsonrpc":"2.0","method":"sum","params":[2,3],"id":1}',
    });
    expect(await post.json()).toEqual({ jsonrpc: '2.0', result: 5, id: 1 });

    broker.up = true;
    expect(await attemptUpgrade(res, url)).toBe('open');
    expect((await readyz(httpUrl)).body).toMatchObject({ status: 'ready' });
  });

  it('refuseWhileBrokerDown: false keeps admitting (readiness still says why it is not ready)', async () => {
    const broker = new SwitchableBroker();
    const { url, httpUrl } = await sumGateway(broker, { refuseWhileBrokerDown: false });
    broker.up = false;
    expect(await attemptUpgrade(res, url)).toBe('open');
    expect(await readyz(httpUrl)).toEqual({
      status: 503,
      body: { status: 'broker-unavailable', sessions: 1 },
    });
  });

  it('while draining, /readyz says draining, broker or not', async () => {
    const broker = new SwitchableBroker();
    const { gateway, url, httpUrl } = await sumGateway(broker);
    const gate = deferred();
    gateway.method('hold', () => gate.promise);
    const open = await openRaw(res, url);
    const held = open.request('hold');
    await waitUntil(() => [...gateway.sessions.values()][0]!.peer.inFlightCount === 1, 'the call');
    broker.up = false;
    const draining = gateway.drain({ deadlineMs: 10_000 });
    expect(await readyz(httpUrl)).toEqual({
      status: 503,
      body: { status: 'draining', sessions: 1 },
    });
    gate.resolve();
    await held;
    await draining;
  });

  const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;
  const mustRun = process.env.CI === 'true';
  it.skipIf(!hasRedisServer && !mustRun)(
    hasRedisServer
      ? 'a real Redis killed: new upgrades get 503 and /readyz says broker-unavailable; back once it restarts'
      : 'a real Redis killed (skipped: no redis-server binary)',
    async () => {
      const port = await freePort();
      const dir = mkdtempSync(join(tmpdir(), 'wsrpc-broker-down-'));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const startRedis = async (): Promise<ChildProcess> => {
        const child = spawn(
          'redis-server',
          ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
          { cwd: dir, stdio: 'ignore' },
        );
        cleanups.push(() => kill(child));
        for (;;) {
          if (child.exitCode !== null) throw new Error(`redis-server exited ${child.exitCode}`);
          if (await canConnect(port)) return child;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      };
      const kill = (child: ChildProcess) => killChild(child);

      const redis = await startRedis();
      const broker = await RedisBroker.create({
        url: `redis://127.0.0.1:${port}`,
        reconnectMaxDelayMs: 100,
      });
      const { url, httpUrl } = await sumGateway(broker);
      const open = await openRaw(res, url);

      await kill(redis);
      await waitUntil(() => !broker.ready, 'the broker to notice Redis is gone');
      expect((await upgradeRefusal(res, url)).status).toBe(503);
      expect(await readyz(httpUrl)).toEqual({
        status: 503,
        body: { status: 'broker-unavailable', sessions: 1 },
      });
      expect((await open.request('sum', [4, 5])).result).toBe(9);

      await startRedis();
      await waitUntil(() => broker.ready, 'the broker to reconnect', 15_000);
      expect(await attemptUpgrade(res, url)).toBe('open');
    },
    30_000,
  );
});

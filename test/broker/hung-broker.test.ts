/**
 * Readiness sees a broker that hangs with its TCP connection up (issue 14, finding 7): a
 * private redis-server or nats-server is stopped with SIGSTOP (its sockets stay open, nothing
 * answers), and /readyz must turn 503 while it is stopped and 200 again after SIGCONT.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { waitUntil } from '../support/waiting.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { canConnect, freePort } from '../support/network.js';
import { killChild } from '../support/processes.js';

const inCi = process.env.CI === 'true';
const has = (program: string, args: string[]): boolean =>
  spawnSync(program, args, { stdio: 'ignore' }).status === 0;
const hasRedis = has('redis-server', ['--version']);
const hasNats = has('nats-server', ['--version']);

const children: ChildProcess[] = [];
const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGCONT');
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  await Promise.all(children.splice(0).map((child) => killChild(child)));
});

async function startServer(program: string, args: string[], port: number): Promise<ChildProcess> {
  const child = spawn(program, args, { stdio: 'ignore' });
  children.push(child);
  await waitUntil(
    async () => child.exitCode !== null || (await canConnect(port)),
    `${program} to listen`,
    15_000,
    20,
  );
  if (child.exitCode !== null) throw new Error(`${program} exited with ${child.exitCode}`);
  return child;
}

async function readyz(running: RunningGateway): Promise<number> {
  const response = await fetch(`${running.httpUrl}/readyz`);
  await response.arrayBuffer();
  return response.status;
}

/** /readyz goes 503 while the broker process is stopped, and back to 200 once it runs again. */
async function checkHang(server: ChildProcess, broker: Broker): Promise<void> {
  const running = await startGateway({ broker });
  cleanups.push(() => running.gateway.close());
  await waitUntil(async () => (await readyz(running)) === 200, 'ready', 15_000, 20);

  server.kill('SIGSTOP'); // its connections stay up; nothing is answered
  await waitUntil(
    async () => (await readyz(running)) === 503,
    '/readyz to see the hang',
    20_000,
    50,
  );
  expect(broker.ready).toBe(false);

  server.kill('SIGCONT');
  await waitUntil(async () => (await readyz(running)) === 200, '/readyz to recover', 20_000, 50);
  expect(broker.ready).toBe(true);
}

describe.skipIf(!hasRedis && !inCi)('a hung Redis', () => {
  it('makes the broker not ready (/readyz 503) until it answers again', async () => {
    const port = await freePort();
    const server = await startServer(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      port,
    );
    const broker = await RedisBroker.create({
      url: `redis://127.0.0.1:${port}`,
      commandTimeoutMs: 300,
      healthCheckIntervalMs: 100,
    });
    cleanups.push(() => broker.close());
    await checkHang(server, broker);
  });
});

describe.skipIf(!hasNats && !inCi)('a hung NATS', () => {
  it('makes the broker not ready (/readyz 503) until it answers again', async () => {
    const port = await freePort();
    const dir = await mkdtemp(join(tmpdir(), 'wsrpc-hung-nats-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const server = await startServer(
      'nats-server',
      ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', dir],
      port,
    );
    const broker = await NatsBroker.connect({
      servers: `nats://127.0.0.1:${port}`,
      timeoutMs: 300,
      healthCheckIntervalMs: 100,
    });
    cleanups.push(() => broker.close());
    await checkHang(server, broker);
  });
});

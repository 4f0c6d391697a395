/**
 * A redis-server of a test's own, without persistence, on a free port: it can be killed and
 * started again on the same port (a restart that loses every key), and stopped.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { withRedis } from '../support/brokers.js';
import { canConnect, freePort } from '../support/network.js';
import { killChild } from '../support/processes.js';
import { hasProgram } from '../support/server-processes.js';
import { waitFor } from '../support/waiting.js';

export class PrivateRedis {
  private child: ChildProcess | undefined;

  private constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  static async start(): Promise<PrivateRedis> {
    const redis = new PrivateRedis(await freePort());
    await redis.run();
    return redis;
  }

  /** SIGKILL, then start again on the same port: an empty Redis. */
  async restart(): Promise<void> {
    await this.stop();
    await this.run();
  }

  async stop(): Promise<void> {
    if (this.child) await killChild(this.child);
    this.child = undefined;
  }

  /** Start it (again, after `stop`) on its port: an empty Redis. */
  async run(): Promise<void> {
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: 'ignore' },
    );
    this.child = child;
    await waitFor(async () => {
      if (child.exitCode !== null) throw new Error(`redis-server on ${this.port} exited`);
      if (!(await canConnect(this.port))) return false;
      return withRedis(this.url, async (redis) => (await redis.ping()) === 'PONG').catch(
        () => false,
      );
    }, `redis-server on ${this.port}`);
  }
}

/**
 * A private redis-server for the tests of one file, and a client of it, handed to `use` before
 * the tests run and stopped after them (where there is no redis-server, neither is made: those
 * tests skip). The client queues its commands while the server is down or restarting and sends
 * them once it is back.
 */
export function withPrivateRedis(use: (server: PrivateRedis, client: Redis) => void): void {
  let server: PrivateRedis | undefined;
  let client: Redis | undefined;
  beforeAll(async () => {
    if (!hasProgram('redis-server')) return;
    server = await PrivateRedis.start();
    client = new Redis(server.url, { maxRetriesPerRequest: null });
    client.on('error', () => undefined);
    use(server, client);
  });
  afterAll(async () => {
    client?.disconnect();
    await server?.stop();
  });
}

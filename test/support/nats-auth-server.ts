/**
 * A private nats-server (JetStream, on a free loopback port) whose users and passwords a test
 * changes while it runs: the configuration file is written again and the server told to reload
 * it (SIGHUP). A client whose password no longer matches is disconnected by the server, and
 * refused on every attempt to reconnect: nats.js gives up on the same authorization error twice
 * in a row (unless `ignoreAuthErrorAbort`) and closes the connection for good, although
 * `maxReconnectAttempts` is -1. Writing the password back lets a new connection in.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { canConnect, freePort } from './network.js';
import { killChild } from './processes.js';
import { waitFor } from './waiting.js';

export type NatsUsers = Record<string, string>;

export class NatsAuthServer {
  private constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly child: ChildProcess,
    private users: NatsUsers,
  ) {}

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Start it with `users` (name: password); resolves once every user can connect. */
  static async start(users: NatsUsers): Promise<NatsAuthServer> {
    const port = await freePort();
    const dir = await mkdtemp(join(tmpdir(), 'wsrpc-nats-auth-'));
    await writeFile(join(dir, 'nats.conf'), config(port, dir, users));
    const child = spawn('nats-server', ['-c', join(dir, 'nats.conf')], { stdio: 'ignore' });
    const server = new NatsAuthServer(port, dir, child, users);
    await waitFor(async () => {
      if (child.exitCode !== null) throw new Error(`nats-server exited (${child.exitCode})`);
      return (await canConnect(port)) && (await server.accepts(Object.keys(users)[0]!));
    }, `nats-server on ${port}`);
    return server;
  }

  /**
   * Reload with `users`; resolves once the server answers with them (each listed user connects),
   * so a client refused from then on is refused by the new list.
   */
  async reload(users: NatsUsers): Promise<void> {
    this.users = users;
    await writeFile(join(this.dir, 'nats.conf'), config(this.port, this.dir, users));
    this.child.kill('SIGHUP');
    await waitFor(async () => {
      for (const user of Object.keys(users)) if (!(await this.accepts(user))) return false;
      return true;
    }, `nats-server on ${this.port} to reload its users`);
  }

  async stop(): Promise<void> {
    await killChild(this.child);
    await rm(this.dir, { recursive: true, force: true });
  }

  /** Whether `user` with its current password gets a connection. */
  private async accepts(user: string): Promise<boolean> {
    try {
      const nc = await connect({
        servers: this.url,
        user,
        pass: this.users[user],
        timeout: 1_000,
        reconnect: false,
      });
      await nc.close();
      return true;
    } catch {
      return false;
    }
  }
}

function config(port: number, dir: string, users: NatsUsers): string {
  const list = Object.entries(users)
    .map(
      ([user, password]) =>
        `    { user: ${JSON.stringify(user)}, password: ${JSON.stringify(password)} }`,
    )
    .join('\n');
  return [
    `listen: 127.0.0.1:${port}`,
    `jetstream { store_dir: ${JSON.stringify(join(dir, 'store'))} }`,
    'authorization {',
    '  users = [',
    list,
    '  ]',
    '}',
    '',
  ].join('\n');
}

/**
 * A nats-server of a test's own (core NATS, no JetStream) on a free port: it can be killed and
 * started again on the same port, and stopped.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { canConnect, freePort } from '../support/network.js';
import { killChild } from '../support/processes.js';
import { waitFor } from '../support/waiting.js';

export class PrivateNats {
  private child: ChildProcess | undefined;

  private constructor(readonly port: number) {}

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  static async start(): Promise<PrivateNats> {
    const nats = new PrivateNats(await freePort());
    await nats.run();
    return nats;
  }

  /** SIGKILL; `run` starts it again on the same port. */
  async stop(): Promise<void> {
    if (this.child) await killChild(this.child);
    this.child = undefined;
  }

  async run(): Promise<void> {
    const child = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(this.port)], {
      stdio: 'ignore',
    });
    this.child = child;
    await waitFor(async () => {
      if (child.exitCode !== null) throw new Error(`nats-server on ${this.port} exited`);
      return canConnect(this.port);
    }, `nats-server on ${this.port}`);
  }
}

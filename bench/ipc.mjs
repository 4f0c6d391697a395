// Parent <-> child plumbing: every child (a contestant's server, the load
// generator) is a forked Node process answering requests over its IPC channel.
import { fork } from 'node:child_process';

/** A monotonic clock in milliseconds that is the same for every process on this machine (CLOCK_MONOTONIC). */
export function nowMs() {
  return Number(process.hrtime.bigint()) / 1e6;
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The parent's handle on one child process: `request(cmd, args)` resolves with the child's answer. */
export class Child {
  constructor(name, modulePath, { execArgv = [], env = {} } = {}) {
    this.name = name;
    this.alive = true;
    this.pending = new Map();
    this.nextId = 0;
    this.proc = fork(modulePath, [], {
      execArgv,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.proc.on('message', (msg) => this.settle(msg));
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        this.alive = false;
        for (const [id, pending] of this.pending) {
          this.settle({ id, error: `${name} exited (${code ?? signal}) during "${pending.cmd}"` });
        }
        resolve();
      });
    });
  }

  request(cmd, args = {}, timeoutMs = 30_000) {
    if (!this.alive) return Promise.reject(new Error(`${this.name} is not running`));
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${this.name}: "${cmd}" timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { cmd, resolve, reject, timer });
      this.proc.send({ id, cmd, args });
    });
  }

  settle(msg) {
    const pending = this.pending.get(msg.id);
    if (!pending) return;
    this.pending.delete(msg.id);
    clearTimeout(pending.timer);
    if (msg.error) pending.reject(new Error(`${this.name}: ${msg.error}`));
    else pending.resolve(msg.result);
  }

  /** Ask the child to exit; kill it if it has not within `graceMs`. */
  async stop(graceMs = 3_000) {
    if (!this.alive) return;
    this.request('exit', {}, graceMs).catch(() => undefined);
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** In a child: answer the parent's requests with `handlers[cmd](args)`; `exit` ends the process. */
export function serve(handlers) {
  process.on('message', async ({ id, cmd, args }) => {
    let reply;
    try {
      const handler = handlers[cmd];
      if (!handler && cmd !== 'exit') throw new Error(`unknown command "${cmd}"`);
      reply = { id, result: handler ? await handler(args) : null };
    } catch (err) {
      reply = { id, error: err instanceof Error ? (err.stack ?? err.message) : String(err) };
    }
    process.send(reply, () => {
      if (cmd === 'exit') process.exit(0);
    });
  });
  // The parent went away (crash, Ctrl-C): never outlive it.
  process.on('disconnect', () => process.exit(0));
}

// The scale run's children: forked Node processes answering the runner over IPC (the
// protocol of bench/ipc.mjs), each started with the open-file limit the run needs when the
// machine lets a process raise it (prlimit), since one process holds every connection.
import { execFileSync, fork } from 'node:child_process';

/** The hard limit on open files this process runs under (`ulimit -Hn`); Infinity when unlimited. */
export function hardFileLimit() {
  const text = execFileSync('sh', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).trim();
  return text === 'unlimited' ? Infinity : Number(text);
}

/**
 * The open-file limit children can get: `wanted` when `prlimit` may set it (raising a hard
 * limit needs CAP_SYS_RESOURCE), else the hard limit they inherit. Node raises its soft
 * limit to the hard one by itself, so only the hard one matters.
 */
export function fileLimitFor(wanted) {
  const hard = hardFileLimit();
  if (hard >= wanted) return { limit: hard, wrap: undefined, note: undefined };
  try {
    execFileSync('prlimit', [`--nofile=${wanted}:${wanted}`, 'true'], { stdio: 'pipe' });
    return { limit: wanted, wrap: ['prlimit', `--nofile=${wanted}:${wanted}`], note: undefined };
  } catch (err) {
    const why = String(err.stderr ?? err.message)
      .trim()
      .split('\n')
      .pop();
    return {
      limit: hard,
      wrap: undefined,
      note: `open files are limited to ${hard} per process (ulimit -Hn) and prlimit cannot raise it (${why})`,
    };
  }
}

/** The runner's handle on one child: `request(cmd, args)` resolves with the child's answer. */
export class ScaleChild {
  constructor(name, modulePath, { execArgv = [], env = {}, wrap } = {}) {
    this.name = name;
    this.alive = true;
    this.pending = new Map();
    this.nextId = 0;
    // With `wrap`, the child is `prlimit --nofile=N:N node <execArgv> <module>`: fork runs
    // execPath with execArgv before the module, and the IPC channel survives the exec.
    const wrapped = wrap
      ? { execPath: wrap[0], execArgv: [...wrap.slice(1), process.execPath, ...execArgv] }
      : { execArgv };
    this.proc = fork(modulePath, [], {
      ...wrapped,
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

  request(cmd, args = {}, timeoutMs = 60_000) {
    // Killed but not yet exited, a child's channel is closed already.
    if (!this.alive || !this.proc.connected)
      return Promise.reject(new Error(`${this.name} is not running`));
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${this.name}: "${cmd}" timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { cmd, resolve, reject, timer });
      // With a callback, a send on a channel that closes meanwhile fails this request only,
      // instead of an 'error' event nobody listens for.
      this.proc.send({ id, cmd, args }, (err) => {
        if (!err) return;
        this.pending.delete(id);
        clearTimeout(timer);
        reject(new Error(`${this.name}: "${cmd}" not sent (${err.message})`));
      });
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
  async stop(graceMs = 5_000) {
    if (!this.alive) return;
    this.request('exit', {}, graceMs).catch(() => undefined);
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  kill() {
    if (this.alive) this.proc.kill('SIGKILL');
  }
}

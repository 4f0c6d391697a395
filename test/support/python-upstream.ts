import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { killChild } from './processes.js';
import { within } from './waiting.js';

const script = fileURLToPath(new URL('./python/upstream.py', import.meta.url));

export interface PythonUpstream {
  readonly child: ChildProcess;
  readonly port: number;
  /** Its JSON-RPC endpoint: http://127.0.0.1:PORT/rpc. */
  readonly url: string;
  /** Call it directly (test.stats, test.reset, orders.cancelled ...): the result, or throws its error. */
  rpc(method: string, params?: unknown): Promise<unknown>;
  /** What it wrote to stderr (a traceback, when it failed). */
  stderr(): string;
  /** Kill it (SIGKILL) and wait for the exit. */
  stop(): Promise<void>;
}

/**
 * The Python upstream (test/support/python/upstream.py) on a free loopback port, or on `port`;
 * resolves once it printed its port (10 s at most). `env` is added to this process's (e.g.
 * WSRPC_API_URL, WSRPC_API_KEY).
 */
export async function startPythonUpstream(
  options: { port?: number; env?: Record<string, string> } = {},
): Promise<PythonUpstream> {
  const child = spawn('python3', [script, String(options.port ?? 0)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...options.env },
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const lines = createInterface({ input: child.stdout! });
  const firstLine = new Promise<string>((resolve, reject) => {
    lines.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`upstream.py exited (${code}):\n${stderr}`)));
  });
  let port: number;
  try {
    port = Number(await within(firstLine, 'upstream.py to print its port'));
  } catch (err) {
    await killChild(child);
    throw err;
  }
  const url = `http://127.0.0.1:${port}/rpc`;
  return {
    child,
    port,
    url,
    async rpc(method, params) {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      });
      const reply = (await response.json()) as { result?: unknown; error?: { message: string } };
      if (reply.error) throw new Error(`${method}: ${reply.error.message}`);
      return reply.result;
    },
    stderr: () => stderr,
    stop: () => killChild(child),
  };
}

import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createGateway } from '../../src/index.js';
import type { Gateway, GatewayOptions } from '../../src/index.js';
import { silentLogger } from '../../src/peer/logger.js';
import { killChild } from '../support/processes.js';

export const root = fileURLToPath(new URL('../../', import.meta.url));
export const cliJs = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

/** Build once when the CLI is missing (`npm test` builds first, a lone vitest may not). */
export async function ensureCliBuilt(): Promise<void> {
  if (existsSync(cliJs)) return;
  await new Promise<void>((resolve, reject) => {
    execFile('npm', ['run', 'build'], { cwd: root }, (err, _stdout, stderr) =>
      err ? reject(new Error(`npm run build failed: ${stderr}`)) : resolve(),
    );
  });
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A running CLI process, its output so far, and how it ended. */
export interface CliProcess {
  child: ChildProcess;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout's complete lines so far. */
  lines(): string[];
  exited: Promise<CliResult>;
}

/** Gateways and CLI processes a test started, all ended in afterEach. */
export class CliResources {
  private readonly gateways: Gateway<unknown>[] = [];
  private readonly children: ChildProcess[] = [];

  /** A gateway on an ephemeral loopback port with a silent logger and no heartbeat. */
  async gateway<C = unknown>(
    options: GatewayOptions<C> = {},
  ): Promise<{ gateway: Gateway<C>; port: number }> {
    const gateway = createGateway<C>({ logger: silentLogger, heartbeatIntervalMs: 0, ...options });
    this.gateways.push(gateway as Gateway<unknown>);
    const { port } = await gateway.listen(0, '127.0.0.1');
    return { gateway, port };
  }

  /** A gateway serving newline-delimited JSON on an ephemeral loopback TCP port (TLS with `tls`). */
  async tcpGateway<C = unknown>(
    options: GatewayOptions<C> = {},
  ): Promise<{ gateway: Gateway<C>; port: number }> {
    const gateway = createGateway<C>({ logger: silentLogger, heartbeatIntervalMs: 0, ...options });
    this.gateways.push(gateway as Gateway<unknown>);
    const { port } = await gateway.listenTcp(0, '127.0.0.1');
    return { gateway, port };
  }

  /** Start `node dist/src/cli/main.js ...args`. */
  start(args: readonly string[], env: NodeJS.ProcessEnv = {}): CliProcess {
    const child = spawn(process.execPath, [cliJs, ...args], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.children.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const exited = new Promise<CliResult>((resolve) => {
      child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
    });
    return {
      child,
      get stdout() {
        return stdout;
      },
      get stderr() {
        return stderr;
      },
      lines: () => stdout.split('\n').slice(0, -1),
      exited,
    };
  }

  /** Run the CLI to its end. */
  run(args: readonly string[], env?: NodeJS.ProcessEnv): Promise<CliResult> {
    return this.start(args, env).exited;
  }

  async cleanup(): Promise<void> {
    await Promise.all(this.children.splice(0).map((child) => killChild(child)));
    await Promise.all(this.gateways.splice(0).map((g) => g.close({ timeoutMs: 1_000 })));
  }
}

/** Poll until `check` returns true; fail after `timeoutMs` with `what`. */
export async function waitFor(
  check: () => boolean,
  what: string,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { exitOf, mainJs, root, waitForLivez } from './demo-process.js';

/**
 * The demo server as `npm start` runs it (`node dist/demo/main.js`, after the build that
 * `npm test`'s pretest also runs), on a port of the test's choosing, restartable on that port.
 */
export class DemoServer {
  private child: ChildProcess | undefined;
  output = '';

  constructor(
    readonly port: number,
    /** More environment for the process (TCP_PORT, TLS_CERT_FILE, ...). */
    private readonly env: Record<string, string> = {},
  ) {}

  get httpUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const child = spawn(process.execPath, [mainJs], {
      cwd: root,
      env: {
        ...process.env,
        PORT: String(this.port),
        HOST: '127.0.0.1',
        LOG_LEVEL: 'warn',
        // Restarts in tests need not wait for the default drain deadline.
        DRAIN_DEADLINE_MS: '1000',
        ...this.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stdout!.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    await waitForLivez(child, this.httpUrl);
  }

  /** SIGTERM (the demo drains and exits 0); resolves with the exit code. */
  async stop(): Promise<number | null> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null)
      return child?.exitCode ?? null;
    this.child = undefined;
    const exited = exitOf(child);
    child.kill('SIGTERM');
    const { code } = await exited;
    return code;
  }

  kill(): void {
    this.child?.kill('SIGKILL');
    this.child = undefined;
  }
}

import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const root = fileURLToPath(new URL('../../', import.meta.url));
export const mainJs = fileURLToPath(new URL('../../dist/demo/main.js', import.meta.url));

/** Build once when `dist/demo/main.js` is missing (`npm test` builds first, a lone vitest may not). */
export async function ensureBuilt(): Promise<void> {
  if (existsSync(mainJs)) return;
  await new Promise<void>((resolve, reject) => {
    execFile('npm', ['run', 'build'], { cwd: root }, (err, _stdout, stderr) =>
      err ? reject(new Error(`npm run build failed: ${stderr}`)) : resolve(),
    );
  });
}

/** Poll /livez until the process answers; fail if it exits first, or after 30 s. */
export async function waitForLivez(child: ChildProcess, httpUrl: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`demo exited early with ${child.exitCode}`);
    try {
      const response = await fetch(`${httpUrl}/livez`);
      await response.arrayBuffer();
      if (response.status === 200) return;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) throw new Error('the demo never answered /livez');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export function exitOf(
  child: ChildProcess,
): Promise<{ code: number | null; signal: string | null }> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null)
      return resolve({ code: child.exitCode, signal: child.signalCode });
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

/**
 * `node file` serving on 127.0.0.1:`port` (log level warn, plus `env`), with its stdout and
 * stderr kept together for the failure message, and its exit.
 */
export function spawnServer(
  file: string,
  port: number,
  env: Record<string, string> = {},
): {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: string | null }>;
} {
  const child = spawn(process.execPath, [file], {
    cwd: root,
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return { child, output: () => output, exited: exitOf(child) };
}

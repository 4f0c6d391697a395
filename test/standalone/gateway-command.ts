import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const cli = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

/**
 * `wsrpc-gateway check-config PATH` or `serve --config PATH` through the built CLI, run to its
 * end (15 s at most): its exit code and what it wrote.
 */
export function runGatewayCommand(command: 'check-config' | 'serve', path: string) {
  const args = command === 'serve' ? ['serve', '--config', path] : ['check-config', path];
  const result = spawnSync(process.execPath, [cli, ...args], {
    encoding: 'utf8',
    timeout: 15_000,
    env: { ...process.env, LOG_LEVEL: 'info' },
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr, path };
}

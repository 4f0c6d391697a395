import type { ChildProcess } from 'node:child_process';

/**
 * Stop a child process and resolve once it has exited (at once if it already has). A signal
 * other than SIGKILL is followed by SIGKILL after 3 s, so a test never waits on a stuck child.
 */
export function killChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = signal === 'SIGKILL' ? undefined : setTimeout(() => child.kill('SIGKILL'), 3_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill(signal);
  });
}

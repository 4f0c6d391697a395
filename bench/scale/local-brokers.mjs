// The machine's own Redis and NATS as the scale runs reach them: their URLs (REDIS_URL and
// NATS_URL override them), and their processes' CPU time, read from /proc, which the runs count
// beside the Node processes they measure themselves.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
export const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

/** A process's CPU time in µs (user + system), from /proc; undefined when it cannot be read. */
export function cpuUsOf(pid) {
  if (!pid) return undefined;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks / CLOCK_TICKS) * 1e6;
  } catch {
    return undefined;
  }
}

/** The pid of the process named `name` (one of them), or undefined. */
export function pidOf(name) {
  try {
    return Number(execFileSync('pidof', ['-s', name], { encoding: 'utf8' }).trim()) || undefined;
  } catch {
    return undefined;
  }
}

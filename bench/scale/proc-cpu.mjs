// Another process's CPU time, read from /proc: the brokers' (redis-server, nats-server), which
// the scale runs count beside the Node processes they measure themselves.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

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

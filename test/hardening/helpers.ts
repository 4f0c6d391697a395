import { WebSocket } from 'ws';
import type { ClientOptions } from 'ws';
import type { LogFn, Logger } from '../../src/peer/logger.js';
import type { Resources } from '../integration/harness.js';
import { RawRpc } from '../pubsub/helpers.js';

/** Open a `ws` socket (tracked by `res`) and resolve once it is open; reject on any refusal. */
export async function openSocket(
  res: Resources,
  url: string,
  protocols?: string | string[],
  options: ClientOptions = {},
): Promise<WebSocket> {
  const socket = res.track(new WebSocket(url, protocols, options));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  return socket;
}

/** A RawRpc whose socket `res` closes in cleanup. */
export async function openRaw(res: Resources, url: string): Promise<RawRpc> {
  const raw = await RawRpc.open(url);
  res.track(raw.socket);
  return raw;
}

/**
 * Try an upgrade: 'open' when it succeeds (the socket stays open and tracked),
 * otherwise the HTTP status that refused it.
 */
export function attemptUpgrade(
  res: Resources,
  url: string,
  options: ClientOptions = {},
): Promise<number | 'open'> {
  const socket = res.track(new WebSocket(url, options));
  return new Promise((resolve, reject) => {
    socket.on('error', () => undefined);
    socket.once('open', () => resolve('open'));
    socket.once('unexpected-response', (_req, response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
      socket.terminate();
    });
    socket.once('close', () => reject(new Error('socket closed before a response')));
  });
}

/**
 * Retry an upgrade every few ms until it is admitted (a slot is released
 * asynchronously, once the server side of a closed socket is gone).
 */
export async function connectWhenAdmitted(
  res: Resources,
  url: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const refusals: number[] = [];
  for (;;) {
    const outcome = await attemptUpgrade(res, url);
    if (outcome === 'open') return;
    refusals.push(outcome);
    if (Date.now() > deadline) {
      throw new Error(`never admitted; refused with ${refusals.slice(-3).join(', ')}`);
    }
    await new Promise<void>((resolve) => setTimeout(resolve, 20));
  }
}

/** GET /metrics as text. */
export async function scrape(httpUrl: string): Promise<string> {
  const response = await fetch(`${httpUrl}/metrics`);
  if (response.status !== 200) throw new Error(`/metrics answered ${response.status}`);
  return response.text();
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Every sample line of a Prometheus text exposition. */
export function parseSamples(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[pair[1]!] = pair[2]!;
    }
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the one sample named `name` with exactly `labels`; undefined when absent. */
export function sampleValue(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const wanted = JSON.stringify(Object.entries(labels).sort());
  const found = parseSamples(text).filter(
    (s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === wanted,
  );
  if (found.length > 1) throw new Error(`${found.length} samples ${name} ${wanted}`);
  return found[0]?.value;
}

export interface LogRecord {
  level: string;
  bindings: Record<string, unknown>;
  obj: unknown;
  msg: string | undefined;
}

/** Serialize a log record the way a JSON logger would see it, Error fields included. */
export function recordText(record: LogRecord): string {
  return JSON.stringify(record, (_key, value: unknown) =>
    value instanceof Error ? { ...value, message: value.message, stack: value.stack } : value,
  );
}

/** A Logger that keeps every call made on it and its children, in order. */
export class CaptureLogger implements Logger {
  readonly trace: LogFn;
  readonly debug: LogFn;
  readonly info: LogFn;
  readonly warn: LogFn;
  readonly error: LogFn;

  constructor(
    readonly records: LogRecord[] = [],
    private readonly bindings: Record<string, unknown> = {},
  ) {
    const at =
      (level: string): LogFn =>
      (obj, msg) =>
        void this.records.push({ level, bindings: this.bindings, obj, msg });
    this.trace = at('trace');
    this.debug = at('debug');
    this.info = at('info');
    this.warn = at('warn');
    this.error = at('error');
  }

  child(bindings: Record<string, unknown>): Logger {
    return new CaptureLogger(this.records, { ...this.bindings, ...bindings });
  }

  /** Every record as one string, to search for secrets. */
  text(): string {
    return this.records.map(recordText).join('\n');
  }

  withMessage(msg: string): LogRecord[] {
    return this.records.filter((r) => r.msg === msg);
  }
}

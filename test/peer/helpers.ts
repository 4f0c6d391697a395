import { vi } from 'vitest';
import type { Logger } from '../../src/peer/logger.js';
import type { Peer, PeerOptions } from '../../src/peer/peer.js';
import type { InMemoryTransport } from '../../src/transport/in-memory-transport.js';
import { createPeerPair, createRawPeer } from '../support/peers.js';
import type { PeerPair } from '../support/peers.js';

export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';

export interface LogLine {
  level: Level;
  obj: unknown;
  msg: string | undefined;
  bindings: Record<string, unknown>;
}

export interface CapturingLogger extends Logger {
  readonly lines: LogLine[];
  at(level: Level): LogLine[];
}

/** A Logger that records every line (children write to the same list). */
export function capturingLogger(
  lines: LogLine[] = [],
  bindings: Record<string, unknown> = {},
): CapturingLogger {
  const log =
    (level: Level) =>
    (obj: unknown, msg?: string): void => {
      lines.push({ level, obj, msg, bindings });
    };
  return {
    lines,
    at: (level) => lines.filter((l) => l.level === level),
    trace: log('trace'),
    debug: log('debug'),
    info: log('info'),
    warn: log('warn'),
    error: log('error'),
    child: (more) => capturingLogger(lines, { ...bindings, ...more }),
  };
}

/** A promise that never settles (a handler that never answers). */
export function never<T = unknown>(): Promise<T> {
  return new Promise<T>(() => undefined);
}

/** Observe whether a promise has settled yet, without leaving a rejection unhandled. */
export function watch<T>(p: Promise<T>): { readonly settled: boolean; readonly outcome: unknown } {
  const state = { settled: false, outcome: undefined as unknown };
  p.then(
    (v) => {
      state.settled = true;
      state.outcome = v;
    },
    (e: unknown) => {
      state.settled = true;
      state.outcome = e;
    },
  );
  return state;
}

/** Every frame a transport sent, parsed (untyped wire data, poked at on purpose). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function frames(t: InMemoryTransport): any[] {
  return t.sent.map((s): unknown => JSON.parse(s));
}

/** Ids of the requests (not notifications) in the frames a transport sent, batches flattened. */
export function requestIds(t: InMemoryTransport): unknown[] {
  const messages = frames(t).flatMap((f: unknown): unknown[] => (Array.isArray(f) ? f : [f])) as {
    method?: unknown;
    id?: unknown;
  }[];
  return messages.filter((m) => typeof m.method === 'string' && 'id' in m).map((m) => m.id);
}

const openPeers: Peer<string>[] = [];

/** createPeerPair, with both peers closed after the test. */
export function pair(
  optionsA: Partial<PeerOptions<string>> = {},
  optionsB: Partial<PeerOptions<string>> = {},
): PeerPair {
  const p = createPeerPair(optionsA, optionsB);
  openPeers.push(p.a, p.b);
  return p;
}

/** createRawPeer, with the peer closed after the test. */
export function raw(options: Partial<PeerOptions<string>> = {}): ReturnType<typeof createRawPeer> {
  const r = createRawPeer(options);
  openPeers.push(r.peer);
  return r;
}

/** For `afterEach`: close every peer made by `pair`/`raw` and restore real timers. */
export function cleanup(): void {
  for (const peer of openPeers.splice(0)) peer.close();
  vi.useRealTimers();
}

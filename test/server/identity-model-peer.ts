// A raw JSON-RPC peer for the identity model test: its requests settle with the reply or with
// `undefined` once the socket has closed (never hang), and the server's calls to it wait until
// the test answers them (a result or an error), so when and how the client answers `rpc.token`
// is a step of the generated sequence. The notifications it is sent are kept in order: what the
// server pushed is compared with what the model says reaches the client. Waits are bounded in real time, whatever the fake clock.
import { WebSocket } from 'ws';
import type { RawReply } from './raw-rpc.js';

// Taken before a test fakes the global timers: the bounds of the waits are real time.
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;
const WAIT_LIMIT_MS = 5_000;

export interface ServerCall {
  id: number | string;
  method: string;
  params: unknown;
}

export interface ModelPeer {
  /** The reply, or `undefined` when the connection closed first. */
  request(method: string, params?: unknown): Promise<RawReply | undefined>;
  /** The server's calls, in the order they arrived (answered or not). */
  serverCalls: ServerCall[];
  /** The server's notifications but its protocol's `rpc.cancel`, in the order they arrived. */
  notifications: { method: string; params: unknown }[];
  answer(call: ServerCall, reply: { result: unknown } | { error: RawReply['error'] }): void;
  /** The close as seen by this peer, once it happened. */
  readonly closeFrame: { code: number; reason: string } | undefined;
  closed: Promise<{ code: number; reason: string }>;
  close(): void;
}

export async function openModelPeer(
  url: string,
  headers?: Record<string, string>,
): Promise<ModelPeer> {
  const socket = new WebSocket(url, { headers });
  let nextId = 1;
  const pending = new Map<number, (reply: RawReply | undefined) => void>();
  const serverCalls: ServerCall[] = [];
  const notifications: { method: string; params: unknown }[] = [];
  let closeFrame: { code: number; reason: string } | undefined;
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.on('close', (code, reason) => {
      closeFrame = { code, reason: reason.toString() };
      for (const settle of pending.values()) settle(undefined);
      pending.clear();
      resolve(closeFrame);
    }),
  );
  socket.on('message', (data) => {
    const message = JSON.parse((data as Buffer).toString('utf8')) as Record<string, unknown>;
    if (typeof message['method'] === 'string') {
      if (message['id'] === undefined) {
        // The cancel of an rpc.token call that timed out carries nothing the model pushes.
        if (message['method'] !== 'rpc.cancel') {
          notifications.push({ method: message['method'], params: message['params'] });
        }
        return;
      }
      serverCalls.push({
        id: message['id'] as number | string,
        method: message['method'],
        params: message['params'],
      });
      return;
    }
    const id = message['id'] as number;
    pending.get(id)?.(message as unknown as RawReply);
    pending.delete(id);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  return {
    request(method, params) {
      if (closeFrame) return Promise.resolve(undefined);
      const id = nextId++;
      const reply = new Promise<RawReply | undefined>((resolve) => pending.set(id, resolve));
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
      return bounded(reply, `the reply to ${method}`);
    },
    serverCalls,
    notifications,
    answer(call, reply) {
      if (closeFrame) return;
      socket.send(JSON.stringify({ jsonrpc: '2.0', id: call.id, ...reply }));
    },
    get closeFrame() {
      return closeFrame;
    },
    closed,
    close: () => socket.close(),
  };
}

/** `promise`, or a rejection naming `what` after a few real seconds (a hang is a failure). */
export function bounded<T>(promise: Promise<T>, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = realSetTimeout(
      () => reject(new Error(`waited ${WAIT_LIMIT_MS} ms for ${what}`)),
      WAIT_LIMIT_MS,
    );
    promise.then(
      (value) => {
        realClearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        realClearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/** Resolves once `ready()` holds, checked every real millisecond or two; bounded like `bounded`. */
export function until(ready: () => boolean, what: string): Promise<void> {
  return bounded(
    new Promise<void>((resolve) => {
      const check = (): void => {
        if (ready()) resolve();
        else realSetTimeout(check, 2);
      };
      check();
    }),
    what,
  );
}

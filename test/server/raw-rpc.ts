// A JSON-RPC peer over a raw `ws` socket, for tests of the server's identity that must not
// depend on the client: it sends requests, answers the server's calls from a table of
// handlers, and records notifications and the close.
import { WebSocket } from 'ws';

export interface RawReply {
  id: number;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

export interface RawRpc {
  socket: WebSocket;
  request(method: string, params?: unknown): Promise<RawReply>;
  notify(method: string, params?: unknown): void;
  /** Notifications received, in order. */
  notifications: { method: string; params: unknown }[];
  /** Resolves once `count` notifications have arrived. */
  notificationsAt(count: number): Promise<{ method: string; params: unknown }[]>;
  /** The server's calls to this peer are answered by these (a missing one: -32601). */
  handlers: Map<string, (params: unknown) => unknown>;
  closed: Promise<{ code: number; reason: string }>;
  close(): void;
}

/** Open a raw socket to `url` (with `headers`), or reject with the refused upgrade's status. */
export async function openRawRpc(url: string, headers?: Record<string, string>): Promise<RawRpc> {
  const socket = new WebSocket(url, { headers });
  let nextId = 1;
  const pending = new Map<number, (reply: RawReply) => void>();
  const notifications: { method: string; params: unknown }[] = [];
  const waiters: (() => void)[] = [];
  const handlers = new Map<string, (params: unknown) => unknown>();
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  socket.on('message', (data) => {
    const message = JSON.parse((data as Buffer).toString('utf8')) as Record<string, unknown>;
    if ('method' in message) {
      const method = message['method'] as string;
      if (message['id'] === undefined) {
        notifications.push({ method, params: message['params'] });
        for (const wake of waiters.splice(0)) wake();
        return;
      }
      const handler = handlers.get(method);
      void Promise.resolve(handler?.(message['params'])).then((result) =>
        socket.send(
          JSON.stringify(
            handler
              ? { jsonrpc: '2.0', id: message['id'], result }
              : {
                  jsonrpc: '2.0',
                  id: message['id'],
                  error: { code: -32601, message: 'Method not found' },
                },
          ),
        ),
      );
      return;
    }
    pending.get(message['id'] as number)?.(message as unknown as RawReply);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('unexpected-response', (_req, res) =>
      reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode })),
    );
    socket.once('error', reject);
  });
  return {
    socket,
    request(method, params) {
      const id = nextId++;
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
      return new Promise((resolve) => pending.set(id, resolve));
    },
    notify(method, params) {
      socket.send(JSON.stringify({ jsonrpc: '2.0', method, params }));
    },
    notifications,
    async notificationsAt(count) {
      while (notifications.length < count) await new Promise<void>((r) => waiters.push(r));
      return notifications;
    },
    handlers,
    closed,
    close: () => socket.close(),
  };
}

import { WebSocket } from 'ws';

/** A parsed JSON-RPC frame as it arrived on the wire. */
export interface WireFrame {
  jsonrpc?: string;
  id?: number | string | null;
  method?: string;
  params?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

/** A notification's params, as topic and stream messages carry them. */
export interface SubscriptionParams {
  subscription: string;
  seq?: number;
  missed?: number;
  result?: unknown;
  complete?: true;
  /** Gap signal: messages history no longer held (null: unknown). */
  gap?: number | null;
  /** The topic's epoch (position, gap signal, epoch notice). */
  epoch?: string;
  error?: { code: number; message: string; data?: unknown };
}

/**
 * A raw `ws` client that speaks JSON-RPC by hand: every frame it receives is
 * parsed and kept in arrival order, so tests can check exact wire content.
 */
export class RawRpc {
  readonly frames: WireFrame[] = [];
  /** Resolves with the close code and reason once the socket has closed. */
  readonly closed: Promise<{ code: number; reason: string }>;
  private lastId = 0;
  private readonly waiters = new Set<() => void>();

  private constructor(readonly socket: WebSocket) {
    socket.on('message', (data) => {
      this.frames.push(JSON.parse((data as Buffer).toString('utf8')) as WireFrame);
      this.wake();
    });
    socket.on('error', () => undefined);
    this.closed = new Promise((resolve) => {
      socket.once('close', (code, reason) => {
        resolve({ code, reason: reason.toString('utf8') });
        this.wake();
      });
    });
  }

  static open(url: string): Promise<RawRpc> {
    const socket = new WebSocket(url);
    return new Promise((resolve, reject) => {
      socket.once('open', () => resolve(new RawRpc(socket)));
      socket.once('error', reject);
    });
  }

  /** Answer the server's rpc.ping calls from now on (a drain's barrier), as a client should. */
  answerPings(): void {
    this.socket.on('message', (data) => {
      const frame = JSON.parse((data as Buffer).toString('utf8')) as WireFrame;
      if (frame.method === 'rpc.ping' && frame.id !== undefined) {
        this.send({ jsonrpc: '2.0', result: 'pong', id: frame.id });
      }
    });
  }

  send(message: unknown): void {
    this.socket.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** Send a request and resolve with its response frame (success or error). */
  async request(method: string, params?: unknown, timeoutMs = 10_000): Promise<WireFrame> {
    const id = ++this.lastId;
    this.send(
      params === undefined
        ? { jsonrpc: '2.0', method, id }
        : { jsonrpc: '2.0', method, params, id },
    );
    return this.response(id, timeoutMs);
  }

  /** The response frame to request `id`, once it is here. */
  async response(id: number | string, timeoutMs = 10_000): Promise<WireFrame> {
    const find = () => this.frames.find((f) => f.id === id && f.method === undefined);
    await this.until(() => find() !== undefined, `response to request ${id}`, timeoutMs);
    return find()!;
  }

  /** A fresh request id, for frames built by hand. */
  nextId(): number {
    return ++this.lastId;
  }

  /** Params of every notification of `method` so far (optionally of one subscription). */
  notifications(subscription?: string, method = 'subscription'): SubscriptionParams[] {
    const out: SubscriptionParams[] = [];
    for (const f of this.frames) {
      if (f.method !== method || f.id !== undefined) continue;
      const params = f.params as SubscriptionParams;
      if (subscription === undefined || params.subscription === subscription) out.push(params);
    }
    return out;
  }

  /** Resolve once `predicate` holds (checked now and after every frame); reject after `timeoutMs`. */
  until(predicate: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
    if (predicate()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!predicate()) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`timed out waiting for ${what} (${this.frames.length} frames so far)`));
      }, timeoutMs);
      this.waiters.add(check);
    });
  }

  /** A round trip: every frame the server wrote before answering this ping is here afterwards. */
  async barrier(): Promise<void> {
    const reply = await this.request('rpc.ping');
    if (reply.result !== 'pong') throw new Error(`unexpected ping reply ${JSON.stringify(reply)}`);
  }

  /** Close with the normal handshake and wait for it to finish. */
  async close(): Promise<void> {
    if (this.socket.readyState !== WebSocket.CLOSED) this.socket.close();
    await this.closed;
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}

/**
 * A subscriber of the chaos suite that speaks the wire protocol by hand on a plain `ws`
 * WebSocket, without the project's client: what it records is exactly what the server sent.
 * (RpcClient checks each message's seq and repairs a silent hole by resubscribing from history,
 * so subscribers built on it cannot show whether the server itself told them of a loss.)
 *
 * Two kinds, one subscription each:
 *   - `position`: `subscribe [topic, null, {"position": true}]`; it reads its position
 *     `{"subscription", "seq", "epoch"}`, then messages, gap signals `{"gap": n | null, "epoch"}`
 *     and epoch notices `{"epoch"}`;
 *   - `plain`: `subscribe [topic]`; every notification is a message, and what the server could
 *     not deliver is counted in the next message's `missed`.
 * It connects once and never reconnects: once its socket closes it records nothing more.
 */
import { WebSocket } from 'ws';
import type { ReceivedEvent, SeqPoint } from './accounting.js';

export type RawKind = 'position' | 'plain';

const isRequestId = (id: unknown): id is string | number =>
  typeof id === 'string' || typeof id === 'number';

interface Params {
  subscription?: unknown;
  seq?: unknown;
  missed?: unknown;
  gap?: unknown;
  epoch?: unknown;
  result?: unknown;
  error?: unknown;
  complete?: unknown;
}

export class RawSubscriber {
  /** Messages and gap signals, in arrival order (epoch notices are informational). */
  readonly events: ReceivedEvent[] = [];
  /** When each event arrived, index for index with `events`. */
  readonly times: number[] = [];
  /** Frames that do not fit the protocol, or a subscription error. */
  readonly problems: string[] = [];
  /** `{"seq", "epoch"}` of a position subscriber. */
  position: { seq: number; epoch?: string } | undefined;
  /** Epoch notices received. */
  epochNotices = 0;
  /** `rpc.reconnect` requests received (ignored: it never reconnects). */
  reconnectRequests = 0;
  /** `rpc.ping` requests answered (a drain sends one after its `rpc.reconnect`). */
  pingsAnswered = 0;
  /** When the subscribe reply arrived, and the broker numbering publishes went to then. */
  subscribedAt = 0;
  gen = 0;
  /** When the socket closed, and with which code. */
  closedAt: number | undefined;
  closeCode: number | undefined;
  /** Called when the socket closes. */
  onClose: (() => void) | undefined;
  /** Set when the engine ends the window: owed up to this seq (inclusive). */
  upTo: SeqPoint | undefined;
  /** Why the window ended there. */
  endedBecause: string | undefined;
  private socket: WebSocket | undefined;
  private id: string | undefined;
  private readonly early: Params[] = [];

  constructor(
    readonly label: string,
    readonly kind: RawKind,
    readonly url: string,
    readonly topic: string,
  ) {}

  /** Connect, subscribe, and (position) read the position; rejects after `timeoutMs`. */
  async open(gen: number, timeoutMs = 10_000): Promise<void> {
    const socket = new WebSocket(this.url);
    this.socket = socket;
    socket.on('error', () => undefined);
    socket.once('close', (code) => {
      this.closedAt = Date.now();
      this.closeCode = code;
      this.onClose?.();
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${this.label}: no subscription within ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    try {
      await Promise.race([this.subscribe(socket, gen), deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  private subscribe(socket: WebSocket, gen: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const params =
        this.kind === 'position' ? [this.topic, null, { position: true }] : [this.topic];
      socket.once('open', () => {
        socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'subscribe', params, id: 1 }));
      });
      socket.once('close', () => reject(new Error(`${this.label}: closed before subscribing`)));
      socket.on('message', (data) => {
        const frame = JSON.parse((data as Buffer).toString('utf8')) as {
          id?: unknown;
          method?: unknown;
          result?: unknown;
          error?: unknown;
          params?: Params;
        };
        if (frame.id === 1 && frame.method === undefined) {
          if (typeof frame.result !== 'string') {
            reject(new Error(`${this.label}: subscribe answered ${JSON.stringify(frame)}`));
            return;
          }
          this.id = frame.result;
          this.subscribedAt = Date.now();
          this.gen = gen;
          for (const early of this.early.splice(0)) this.notification(early);
          if (this.kind === 'plain') resolve();
        } else if (frame.method === 'subscription' && frame.params !== undefined) {
          if (this.id === undefined) this.early.push(frame.params);
          else this.notification(frame.params);
          if (this.position !== undefined) resolve();
        } else if (frame.method === 'rpc.reconnect') {
          this.reconnectRequests++;
        } else if (frame.method === 'rpc.ping' && isRequestId(frame.id)) {
          // A drain's barrier after its notice: answered as the wire protocol asks of a client.
          this.pingsAnswered++;
          socket.send(JSON.stringify({ jsonrpc: '2.0', result: 'pong', id: frame.id }));
        } else this.problems.push(`${this.label}: unexpected frame ${JSON.stringify(frame)}`);
      });
    });
  }

  private notification(params: Params): void {
    if (params.subscription !== this.id) {
      this.problems.push(
        `${this.label}: notification of another subscription ${JSON.stringify(params)}`,
      );
      return;
    }
    const at = Date.now();
    const epoch = typeof params.epoch === 'string' ? params.epoch : undefined;
    if (params.error !== undefined || params.complete !== undefined) {
      this.problems.push(`${this.label}: subscription ended ${JSON.stringify(params)}`);
    } else if ('result' in params) {
      if (typeof params.seq !== 'number') {
        this.problems.push(`${this.label}: message without a seq ${JSON.stringify(params)}`);
      }
      const event: ReceivedEvent = { data: params.result, at };
      if (typeof params.seq === 'number') event.seq = params.seq;
      if (typeof params.missed === 'number') event.missed = params.missed;
      this.push(event);
    } else if (this.kind === 'plain') {
      this.problems.push(`${this.label}: a plain subscriber got ${JSON.stringify(params)}`);
    } else if ('gap' in params) {
      if (params.gap !== null && typeof params.gap !== 'number') {
        this.problems.push(`${this.label}: a gap signal of ${JSON.stringify(params.gap)}`);
      } else this.push({ data: undefined, gap: params.gap, at });
    } else if (typeof params.seq === 'number') {
      if (this.position !== undefined || this.events.length > 0) {
        this.problems.push(`${this.label}: a second position ${JSON.stringify(params)}`);
      } else this.position = epoch === undefined ? { seq: params.seq } : { seq: params.seq, epoch };
    } else if (epoch !== undefined) {
      this.epochNotices++;
    } else this.problems.push(`${this.label}: unexpected notification ${JSON.stringify(params)}`);
  }

  private push(event: ReceivedEvent): void {
    if (this.kind === 'position' && this.position === undefined) {
      this.problems.push(
        `${this.label}: ${event.gap === undefined ? 'a message' : 'a gap signal'} before the position`,
      );
    }
    this.events.push(event);
    this.times.push(event.at);
  }

  get isOpen(): boolean {
    return this.socket?.readyState === WebSocket.OPEN;
  }

  /** The last message received: its seq and the numbering of its publish (`gen`), if ours. */
  lastMessage(gen: (data: unknown) => number | undefined): SeqPoint | undefined {
    for (let k = this.events.length - 1; k >= 0; k--) {
      const event = this.events[k]!;
      if (event.gap !== undefined || event.seq === undefined) continue;
      const g = gen(event.data);
      if (g !== undefined) return { gen: g, seq: event.seq };
    }
    return undefined;
  }

  /** Close at once (cleanup). */
  terminate(): void {
    this.socket?.terminate();
  }

  /** Close the socket (the engine's own doing: its window has ended) and wait for it. */
  async close(timeoutMs = 5_000): Promise<void> {
    const socket = this.socket;
    if (!socket || socket.readyState === WebSocket.CLOSED) return;
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.close();
    const timer = setTimeout(() => socket.terminate(), timeoutMs);
    await closed;
    clearTimeout(timer);
  }
}

import type { UnencodableMessageError, WireCodec } from '../encoding/codec.js';
import type { Transport, TransportListener } from './transport.js';
import { flushAfterTask, MAX_GATHERED_FRAMES } from './turn-coalescer.js';

/**
 * The part of the WHATWG WebSocket API the client uses. The browser's native
 * WebSocket and the `ws` package's client both provide it.
 */
export interface WebSocketLike {
  readonly readyState: number;
  readonly bufferedAmount: number;
  readonly protocol: string;
  binaryType: string;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

/** A WebSocket class: `globalThis.WebSocket` in browsers, `WebSocket` from `ws` in Node 20. */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => object;

const OPEN = 1;
/** Default of `maxBufferedBytes`: 4 MiB, as the gateway's own `maxBufferedBytes`. */
export const DEFAULT_CLIENT_MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
/** How often a transport that stopped reading looks whether its peer has read enough. */
const RESUME_POLL_MS = 10;
/**
 * A socket that cannot stop reading is closed only this many times past `maxBufferedBytes`: what
 * the application sends itself (an upload on a slow link) may queue past the pause bound.
 */
const CLOSE_FACTOR = 16;
/**
 * Nesting accepted in a binary frame from the gateway, which sends nothing deeper (encoding/
 * encoded-depth.ts MAX_MESSAGE_DEPTH; a literal, as the client's bundle carries no module of
 * src/encoding/, held equal to it by test/client/binary-unencodable.test.ts): past it, a parse
 * error, not a deep decode by a recursive decoder.
 */
export const MAX_BINARY_DEPTH = 515;
const decoder = /* @__PURE__ */ new TextDecoder();

function toText(data: unknown): string {
  if (typeof data === 'string') return data;
  if (data instanceof ArrayBuffer) return decoder.decode(data);
  if (ArrayBuffer.isView(data)) return decoder.decode(data);
  return String(data);
}

interface Corkable {
  cork(): void;
  uncork(): void;
}

/** A socket that can stop reading: a `ws` WebSocket in Node, the NDJSON sockets (tcpSocket). */
interface Pausable {
  pause(): void;
  resume(): void;
}

/** Read-side back-pressure of one socket (see WebSocketTransportOptions.maxBufferedBytes). */
interface ReadGate {
  /** After an incoming message was handled: stop reading if too much waits for the peer. */
  check(): void;
  paused(): boolean;
}

/**
 * Kept in a closure rather than on the transport: its locals minify, and it is in every browser
 * bundle of the client. Once the socket is no longer open, the next look stops looking.
 */
function readGate(
  socket: WebSocketLike,
  limit: number,
  refuse: (reason: string) => void,
): ReadGate {
  const { pause, resume } = socket as Partial<Pausable>;
  let timer: ReturnType<typeof setTimeout> | undefined;
  // Resume once the peer has read the queue down to half the bound (hysteresis, as the gateway).
  const poll = (): void => {
    timer = undefined;
    if (socket.readyState !== OPEN) return;
    if (socket.bufferedAmount > limit / 2) timer = setTimeout(poll, RESUME_POLL_MS);
    else resume!.call(socket);
  };
  return {
    check() {
      if (socket.bufferedAmount <= limit || timer !== undefined) return;
      // Nothing else bounds what a browser's WebSocket queues: give up on a peer that does not read.
      if (!pause || !resume) {
        const bound = limit * CLOSE_FACTOR;
        if (socket.bufferedAmount > bound) refuse(`over ${bound} bytes unread by the peer`);
        return;
      }
      pause.call(socket);
      timer = setTimeout(poll, RESUME_POLL_MS);
    },
    paused: () => timer !== undefined,
  };
}

/** Options of a WebSocketTransport. */
export interface WebSocketTransportOptions {
  /**
   * Bytes queued for the peer (`bufferedAmount`) past which, after an incoming message was
   * handled, the transport stops reading until the peer has read them down to half: a peer that
   * sends requests and never reads the answers cannot grow them without bound. A socket that
   * cannot stop reading (a browser's WebSocket) is closed with 1008 instead, past 16 times the
   * bound (64 MiB by default: an application's own large sends may queue past 4 MiB). Default 4 MiB
   * (DEFAULT_CLIENT_MAX_BUFFERED_BYTES); 0: no bound.
   */
  maxBufferedBytes?: number;
}

/**
 * Client-side adapter over an already-open WHATWG-style WebSocket. Under Node
 * (`ws`), it corks the socket on a write and uncorks it once the current task is
 * done, as the server does (turn-coalescer); a browser's WebSocket cannot be
 * corked (see the client's `batchCalls`).
 */
export class WebSocketTransport implements Transport {
  // #private: their names minify, and the class is in every browser bundle of the client.
  #listener: TransportListener | undefined;
  readonly #raw: Corkable | undefined;
  #corked: boolean | undefined;
  readonly #gate: ReadGate;
  /** The negotiated binary codec: every frame both ways is binary. Undefined: JSON text. */
  readonly #codec: WireCodec | undefined;

  /** Frames sent under the present cork (MAX_GATHERED_FRAMES). */
  #gathered = 0;

  /** Uncork: what was written since the cork leaves in one write (called by turn-coalescer). */
  flushWrites(): void {
    this.#corked = false;
    this.#gathered = 0;
    this.#raw?.uncork();
  }

  constructor(
    readonly socket: WebSocketLike,
    codec?: WireCodec,
    options: WebSocketTransportOptions = {},
  ) {
    this.#codec = codec;
    const raw = (socket as { _socket?: Partial<Corkable> })._socket;
    this.#raw = typeof raw?.cork === 'function' ? (raw as Corkable) : undefined;
    const limit = options.maxBufferedBytes ?? DEFAULT_CLIENT_MAX_BUFFERED_BYTES;
    // 1008, policy violation; a literal, as CloseCode would bring its whole table into the bundle.
    const gate = readGate(socket, limit > 0 ? limit : Infinity, (reason) =>
      this.close(1008, reason),
    );
    this.#gate = gate;
    socket.binaryType = 'arraybuffer';
    socket.onmessage = ({ data }) => {
      // A text frame on a binary connection is refused (1003), not read.
      if (codec && typeof data === 'string') {
        this.close(1003, `text frame on a ${codec.name} connection`);
      } else {
        this.#listener?.receive(
          codec
            ? codec.toText(
                data instanceof ArrayBuffer ? new Uint8Array(data) : (data as Uint8Array),
                MAX_BINARY_DEPTH,
              )
            : toText(data),
        );
      }
      // The answers it sent count: reading more would only queue more for a peer not reading.
      gate.check();
    };
    // `ws` refusing a frame (past maxPayload, not UTF-8, malformed) closes with the code it sends
    // the server, but reports 1006 here; that code is on its error, under a symbol.
    let refused: [number, string] | undefined;
    socket.onclose = (event) =>
      this.#listener?.transportClosed(...(refused ?? [event.code, event.reason]));
    socket.onerror = (event) => {
      const err = (event as { error?: Record<symbol, number> & Error }).error;
      const key =
        err && Object.getOwnPropertySymbols(err).find((k) => k.description === 'status-code');
      if (key) refused = [err[key]!, err.message];
    };
  }

  /** True while reading is paused because the peer left more than `maxBufferedBytes` unread. */
  get readingPaused(): boolean {
    return this.#gate.paused();
  }

  get bufferedAmount(): number {
    return this.socket.bufferedAmount;
  }

  /** The close handshake has begun (CLOSING or CLOSED): `send` drops what it is given. */
  get closeStarted(): boolean {
    return this.socket.readyState > OPEN;
  }

  listen(listener: TransportListener): void {
    this.#listener = listener;
  }

  send(frame: string): void {
    const codec = this.#codec;
    if (this.socket.readyState !== OPEN) return;
    if (this.#raw && !this.#corked) {
      this.#corked = true;
      this.#raw.cork();
      flushAfterTask(this);
    }
    try {
      this.socket.send(codec ? codec.toBinary(frame) : frame);
      // Many calls in one task go every MAX_GATHERED_FRAMES, for the server to start on them
      // (in a browser, where nothing is corked, flushing does nothing).
      if (++this.#gathered >= MAX_GATHERED_FRAMES) this.flushWrites();
    } catch (err) {
      // Not sent: nested deeper than the codec encodes safely (codec.ts textToBinary). As the
      // gateway does, a call is answered here with the codec's -32603 `data: { reason }`. A lone
      // notification's UnencodableMessageError is thrown to its sender (`notify` throws). A
      // batch goes again message by message, so that only what cannot be encoded is refused
      // (the codec answers all of a batch's calls, or none); a notification in it was sent
      // with others, its sender's call over, so its loss is told by closing 1011 with why.
      const { answers } = err as UnencodableMessageError;
      if (frame[0] === '[') {
        try {
          for (const one of JSON.parse(frame) as unknown[]) this.send(JSON.stringify(one));
        } catch (lost) {
          this.close(1011, (lost as Error).message);
        }
      } else if (answers) queueMicrotask(() => this.#listener?.receive(answers));
      else if ((err as Error).name === 'UnencodableMessageError') throw err;
      // Anything else the socket throws (none is known) reaches no caller: the connection ends.
      else this.close(1011, (err as Error).message);
    }
  }

  close(code = 1000, reason = ''): void {
    try {
      this.socket.close(code, reason);
    } catch {
      this.socket.close();
    }
  }
}

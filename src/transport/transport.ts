import type { BudgetLedger } from './output-budget.js';

/**
 * The one seam between the RPC engine and a socket. A transport carries whole
 * text frames; it does not parse them. Implementations: the in-memory pair
 * (tests), the `ws` adapter (server side) and the WebSocket adapter (browser
 * and Node clients).
 */
export interface Transport {
  /**
   * Queue one text frame; a closed transport drops it. Throws only for a lone notification its
   * encoding cannot carry (nested too deep for a binary codec: UnencodableMessageError), which
   * is then not sent, so that its sender is told.
   */
  send(frame: string): void;
  /**
   * Send a frame whose text `make` makes when it is written (undefined: nothing to send), then
   * call `written`: at once, or, when the turn's output is spent or this connection's earlier
   * frames wait, in a later turn, in order with them. What many replies settling together make
   * (their JSON text) is then made a turn's worth at a time, as it is written. Dropped, neither
   * called, if the transport closes first. Absent: the caller makes the text and sends it.
   */
  sendMade?(make: () => string | undefined, written?: () => void): void;
  /**
   * Send one message made of pieces (`source.next` gives each, then undefined), then call `written`:
   * made and written as the turn's output allows; past it, the message goes on in later turns
   * (a WebSocket message in fragments, an NDJSON line in parts), nothing else of this connection
   * in between. A message whose pieces all fit the turn goes as one frame. Dropped, `written`
   * not called, if the transport closes first. Absent: the caller joins the pieces and sends them.
   */
  sendPieces?(source: PieceSource, written?: () => void): void;
  /**
   * Whether a frame sent now would wait for an output turn: the turn's output is spent, or this
   * connection's frames wait already. A reply made now would be made ahead of its write.
   * Absent: frames never wait.
   */
  outputWaits?(): boolean;
  /**
   * Count `chars` toward the turn's output: text made for this connection ahead of its write (a
   * batch member's reply, counted again when it is written). Absent: output is not counted.
   */
  chargeOutput?(chars: number): void;
  /** Start closing; `listener.transportClosed` fires once the close is complete. */
  close(code?: number, reason?: string): void;
  /**
   * True once the close has begun (either side's), before `transportClosed`: a frame sent now is
   * dropped. Absent: the transport is closed only as `transportClosed` says.
   */
  readonly closeStarted?: boolean;
  /** Bytes queued but not yet written to the network. */
  readonly bufferedAmount: number;
  /** Attach the single consumer. Called once, right after construction. */
  listen(listener: TransportListener): void;
  /**
   * Count `count` more incoming messages against the transport's input budget, at the least a
   * message costs each (the gateway's `limits.messageCostBytes`): the members of a batch after
   * the first, known only once the frame is parsed. Absent: the transport has no such budget.
   */
  chargeMessages?(count: number): void;
  /**
   * Count `bytes` more against the transport's input budget: work a message asked of the
   * receiver beyond reading it (a contract's params validation, its time in bytes). Absent: the
   * transport has no such budget.
   */
  chargeBytes?(bytes: number): void;
}

/** A message made piece by piece (Transport.sendPieces). */
export interface PieceSource {
  /** The next piece, made now; undefined after the last. */
  next(): string | undefined;
  /**
   * The characters made so far: the pieces', and any made and not sent (a batch member's reply
   * replaced for being too large). What the transport counts toward the turn's output.
   */
  readonly made: number;
  /**
   * When the message is a JSON array given a member a piece (a batch's reply: the first piece
   * opens the array with its first member, each further piece is a comma and a member, the last
   * closes the array), how many members it has: a transport with a binary encoding converts
   * it member by member. Undefined: the message is converted whole.
   */
  readonly members?: number;
}

/**
 * One message encoded once and sent on many transports (fan-out): its UTF-8
 * bytes, and a per-transport-kind wire form built by the first that asks.
 */
export interface EncodedFrame {
  readonly bytes: Uint8Array;
  wire<T>(build: (bytes: Uint8Array) => T): T;
}

/** What a server session runs on. */
export type TransportKind = 'websocket' | 'http' | 'sse' | 'tcp' | 'stdio';

/**
 * What a server session needs from its transport beyond `Transport`: pre-built fan-out
 * frames, flow control for slow consumers, and whether it can carry messages the server
 * sends on its own (a plain HTTP exchange cannot).
 */
export interface ServerTransport extends Transport {
  readonly kind: TransportKind;
  /** False for request/response transports (HTTP POST): no server-to-client calls, notifications or subscriptions. */
  readonly canPush: boolean;
  send(frame: string | EncodedFrame): void;
  /**
   * Call `listener` once the write buffer has emptied (what this turn wrote included), however
   * little was queued; returns a function that cancels it.
   */
  onDrain(listener: () => void): () => void;
  /**
   * True while the transport has stopped reading because its peer left more than the
   * gateway's `maxBufferedBytes` unread (read-side back-pressure). Absent: it never stops.
   */
  readonly readingPaused?: boolean;
  /**
   * Report the bytes queued for the peer to the node-wide output budget from now on
   * (`maxBufferedBytesTotal`). Absent: the transport is not counted (an HTTP exchange).
   */
  joinBudget?(budget: BudgetLedger): void;
  /**
   * Call `listener` once everything queued so far has been handed to the operating system
   * (what is queued later does not count): the peer has read enough to take it.
   */
  onWritten?(listener: () => void): void;
}

export interface TransportListener {
  /** One whole incoming text frame. */
  receive(text: string): void;
  /** The transport has closed; called once. */
  transportClosed(code: number, reason: string): void;
}

/** WebSocket close codes this project uses; see docs/wire-protocol.md, "Close codes". */
export const CloseCode = {
  Normal: 1000,
  GoingAway: 1001,
  UnsupportedData: 1003,
  NoStatus: 1005,
  Abnormal: 1006,
  PolicyViolation: 1008,
  MessageTooBig: 1009,
  InternalError: 1011,
  ServiceRestart: 1012,
  TryAgainLater: 1013,
} as const;

import type { Duplex } from 'node:stream';
import { WebSocket } from 'ws';
import type { RawData } from 'ws';
import {
  UnencodableMessageError,
  arrayPartToBinary,
  binaryToText,
  jsonBytesToBinary,
  textToBinary,
} from '../encoding/codec.js';
import { strictUtf8 } from '../protocol/invalid-utf8.js';
import type { WireCodec } from '../encoding/codec.js';
import { CloseCode } from './transport.js';
import type { EncodedFrame, PieceSource, ServerTransport, TransportListener } from './transport.js';
import type { BudgetLedger, BudgetMember } from './output-budget.js';
import type { SharedDeflate } from './deflate-frames.js';
import {
  countOutput,
  directDeliveryAllowed,
  heldOutputSpent,
  outputSpent,
  queueHeld,
  keepWaiting,
  takePieces,
  dropsWaitingOutput,
  writeWaitingFrames,
} from './input-turns.js';
import type {
  HeldTurnTaker,
  Pieces,
  WaitingFrame,
  WaitingOutput,
  WaitingOutputWriter,
} from './input-turns.js';
import { flushAfterTask, MAX_GATHERED_FRAMES } from './turn-coalescer.js';
import { whenDrained } from './when-drained.js';
import type { Upstream } from './when-drained.js';

/** A message's bytes as ws hands them over (a Buffer, its fragments, or an ArrayBuffer). */
function bytesOf(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/**
 * The close code of a message whose bytes are not what its type says (RFC 6455, 7.4.1): ws
 * closes with it a text frame that is not UTF-8, and so does this transport a binary frame read
 * as JSON text.
 */
const INVALID_PAYLOAD = 1007;

/** The bytes of a message as ws hands it over (a Buffer, its fragments, or an ArrayBuffer). */
function byteLengthOf(data: RawData): number {
  if (!Array.isArray(data)) return data.byteLength;
  let length = 0;
  for (const fragment of data) length += fragment.length;
  return length;
}

/**
 * What a binary message (MessagePack, CBOR) costs the input budget: the larger of its frame's
 * bytes and the UTF-8 bytes of the JSON text it was turned into, at least `floor`. The gateway
 * handles the text, which can be six times the frame and more (a control character in a
 * string: one byte in the frame, `\u0001` in the text; a CBOR half-precision float: three bytes,
 * up to 22 characters), so a client pays for the same work whichever encoding it sends, never
 * less than the same content sent as JSON text would cost.
 */
export function binaryMessageCost(frameBytes: number, text: string, floor: number): number {
  const paid = frameBytes > floor ? frameBytes : floor;
  // UTF-8 takes at most three bytes a UTF-16 unit: a text that cannot be larger is not measured.
  if (3 * text.length <= paid) return paid;
  const textBytes = Buffer.byteLength(text);
  return textBytes > paid ? textBytes : paid;
}

/**
 * What limits the bytes a connection reads (the gateway's `limits.bytesPerSecond`): one for all
 * of a server's connections, or one for each address group's (`bytesPerSecondPerIp`), each
 * connection given a budget of its own at its first message.
 */
export interface InputLimit {
  /**
   * A connection's budget. Where the limit is shared (an address group's), `reader` is told
   * whenever another connection's bytes put the shared budget in debt.
   */
  budget(reader?: InputReader): InputBudget;
  /**
   * Told once for each connection made with this limit, when it has closed: a limit of an
   * address group's connections counts them.
   */
  release?(): void;
}

/**
 * The default of limits.messageCostBytes, the least bytes an incoming message costs its
 * connection's input budget: reading an empty frame and answering it costs the gateway about
 * what parsing and answering this many bytes of an ordinary request does (docs/performance.md,
 * "The input budget's floor").
 */
export const DEFAULT_MESSAGE_COST_BYTES = 256;

/**
 * On a connection that negotiated permessage-deflate, the least a message costs its input
 * budget is this many times the floor (`limits.messageCostBytes`): ws inflates every message
 * of such a connection on its own (no context takeover), at a cost per message (about 200 µs,
 * measured on Node 20) some 16 times that of reading and answering an empty frame on a plain
 * one, whatever its size.
 */
export const DEFLATE_MESSAGE_COST_FACTOR = 16;

/** One connection's input budget. */
export interface InputBudget {
  /** Count `bytes` read: the ms to stop reading for before it has refilled, 0 for none. */
  spend(bytes: number): number;
  /** Its connection has closed: its reader is told nothing more. */
  close?(): void;
}

/**
 * A connection reading against a budget it shares with others (its address group's): told when
 * another connection's bytes put that budget in debt, it stops reading until the budget has
 * refilled, as after bytes of its own. Left reading, each connection would notice the debt only
 * at its own next message, after parsing all of a read more (64 KiB, a thousand small
 * requests): a hundred connections of one address read a hundred of those at once, however
 * deep in debt the address already was.
 */
export interface InputReader {
  sharedBudgetInDebt(): void;
}

/**
 * A connection's input budget, the limit it was made with (told when the connection closes),
 * and the timer that resumes reading once it has refilled. Made at the first message, and kept
 * in place of the limit on the socket (TransportSocket.inputLimit): a message costs no lookup,
 * and a connection that never sends holds none.
 */
class InputReading {
  timer: ReturnType<typeof setTimeout> | undefined = undefined;
  constructor(
    readonly limit: InputLimit,
    readonly budget: InputBudget,
  ) {}
}

/**
 * What ws's server allows by default (its `maxPendingAutoPongs`): a peer with this many pongs
 * not yet written (it pings and does not read) is cut off.
 */
export const MAX_PENDING_PONGS = 60;

/** The write callback of a pong: one fewer pending on its socket. */
function pongWritten(this: TransportSocket): void {
  this.pendingPongs = (this.pendingPongs ?? 1) - 1;
}

/**
 * The WebSocket class a gateway's server makes (WebSocketServer's `WebSocket` option). ws
 * reports everything through `emit`; this class hands message, close, pong and error
 * straight to its transport instead of through listeners, so a connection carries no
 * listener entries at all (each costs memory in every socket's event table) and a message
 * costs no listener dispatch. Listeners someone adds still run.
 *
 * It also answers pings, as ws does with its `autoPong` on (the server is made with it off):
 * ws's own answering keeps a closure per socket for the pong's write callback, made with the
 * socket whether or not a ping ever comes; here the callback is made per ping.
 */
export class TransportSocket extends WebSocket {
  rpcTransport: WsTransport | undefined = undefined;
  /**
   * The bytes its connection may read (see InputLimit); from its first message on, the
   * InputReading made of that limit, which keeps it. Undefined: no limit. Kept here, not in
   * the settings transports share: connections from different address groups have different
   * ones (limits.bytesPerSecondPerIp), and settings of their own would cost each far more.
   */
  inputLimit: InputLimit | InputReading | undefined = undefined;
  /**
   * Pongs sent and not yet written (see MAX_PENDING_PONGS). Declared only: the property is
   * added by the first ping, so a socket that is never pinged (a browser never pings) has no
   * slot for it.
   */
  declare pendingPongs?: number;

  override emit(event: string | symbol, first?: unknown, second?: unknown): boolean {
    if (event === 'ping') this.answerPing(first as Buffer);
    const transport = this.rpcTransport;
    if (transport) {
      if (event === 'message') transport.onSocketMessage(first as RawData, second as boolean);
      else if (event === 'close') transport.onSocketClose(first as number, second as Buffer);
      else if (event === 'pong') transport.onPong(first as Buffer);
      else if (event === 'ping') transport.onPing(first as Buffer);
      // 'close' always follows 'error'; handling it here is what keeps ws's emit from throwing.
      else if (event === 'error' && this.listenerCount('error') === 0) return true;
    }
    return super.emit(event, first, second);
  }

  /** What ws's autoPong does: pong with the ping's payload, or terminate a peer too far behind. */
  private answerPing(data: Buffer): void {
    if (this.readyState !== this.OPEN) return;
    const pending = this.pendingPongs ?? 0;
    if (pending >= MAX_PENDING_PONGS) {
      this.terminate();
      return;
    }
    this.pendingPongs = pending + 1;
    this.pong(data, false, pongWritten.bind(this));
  }
}

/**
 * ws's sender is neither compressing a message (permessage-deflate) nor holding any queued
 * behind one: a frame written straight to the socket now cannot overtake one of its own.
 */
function senderIdle(socket: WebSocket): boolean {
  const sender = (socket as unknown as { _sender?: { _queue?: unknown[]; _state?: unknown } })
    ._sender;
  // _state is 0 (DEFAULT) unless deflating or reading a Blob.
  return sender?._queue?.length === 0 && !sender._state;
}

/**
 * ws's sender holds bytes: messages it compresses (permessage-deflate) or keeps queued behind
 * one; what its `bufferedAmount` counts beyond the socket's own buffer.
 */
function senderHolding(socket: WebSocket): boolean {
  const sender = (socket as unknown as { _sender?: { _bufferedBytes?: number } })._sender;
  return (sender?._bufferedBytes ?? 0) > 0;
}

/**
 * Per transport, while a whenDrained wait finds the bytes it waits on held by ws's sender
 * (compressing, or queued behind a message it compresses) and none in the socket: the checks to
 * run once ws has written one of the messages it held. Only transports waiting so have an entry;
 * kept here rather than in a field, which every connection would carry.
 */
const senderWaits = new WeakMap<WsTransport, Set<() => void>>();

/** The write callback of a message handed to ws's sender: wakes what waits for that sender. */
function wakeSenderWaits(transport: WsTransport): void {
  const waits = senderWaits.get(transport);
  if (waits === undefined) return;
  senderWaits.delete(transport);
  for (const wake of waits) wake();
}

/**
 * ws's Receiver, as far as this module reaches into it: the step that inflates a compressed
 * frame (permessage-deflate) and, once inflated, hands its message over and parses on.
 */
interface InflatingReceiver {
  decompress(data: Buffer, cb: (err?: Error | null) => void): void;
}

/** A compressed frame ws is to inflate once its connection reads on (see waitsToInflate). */
interface WaitingInflate {
  readonly receiver: InflatingReceiver;
  readonly data: Buffer;
  readonly cb: (err?: Error | null) => void;
  /** On the socket's 'close': ws finishes parsing (and emits its close) only past this frame. */
  readonly onClose: () => void;
}

/**
 * Per transport, the compressed frame ws waits to inflate (see WsTransport.waitsToInflate).
 * Only transports holding one have an entry; kept here rather than in a field, which every
 * connection would carry.
 */
const waitingInflates = new WeakMap<WsTransport, WaitingInflate>();

/**
 * The compressed frames a closing connection's receiver inflates on its way to the peer's close
 * frame (see WsTransport.closingInflatesSpent), and how many each closing transport has.
 */
export const CLOSING_INFLATES = 8;
const closingInflates = new WeakMap<WsTransport, number>();

/** ws's own `decompress` (Receiver.prototype), and the key of a receiver's WebSocket. */
let receiverDecompress: InflatingReceiver['decompress'] | undefined;
let receiverSocketKey: symbol | undefined;

/**
 * A receiver's `decompress` on a connection that negotiated permessage-deflate: ws parses a
 * chunk it has read to its end and hands over every message in it however paused the socket is,
 * and one 64 KiB read can carry some sixty frames that each inflate to maxMessageBytes. While
 * the transport holds messages or has paused reading, the frame waits, compressed, and the
 * receiver with it (it parses nothing past a frame being inflated): the transport inflates it
 * once it reads on.
 */
function decompressUnlessWaiting(
  this: InflatingReceiver,
  data: Buffer,
  cb: InflatedCallback,
): void {
  const socket = (this as unknown as Record<symbol, TransportSocket | undefined>)[
    receiverSocketKey!
  ];
  // Inflating ends after the chunk that carried the frame was reported (writeCounted): what
  // the message holds inflated is reported once ws has parsed on past it. ws hands the callback
  // it was given on to the next frame of the same chunk: wrapped once, not once per frame (ten
  // thousand compressed frames in one read would nest ten thousand calls deep).
  const inflated = cb[REPORTS_INPUT] === true ? cb : reportingInput(cb, socket);
  if (socket?.rpcTransport?.waitToInflate(this, data, inflated) !== true) {
    receiverDecompress!.call(this, data, inflated);
  }
}

/** Marks a callback of ws's receiver that reports the transport's input once called. */
const REPORTS_INPUT = Symbol('reportsInput');

type InflatedCallback = ((err?: Error | null) => void) & { [REPORTS_INPUT]?: true };

/** `cb`, then report what `socket`'s transport holds. */
function reportingInput(
  cb: (err?: Error | null) => void,
  socket: TransportSocket | undefined,
): InflatedCallback {
  const inflated: InflatedCallback = (err) => {
    cb(err);
    socket?.rpcTransport?.reportInput();
  };
  inflated[REPORTS_INPUT] = true;
  return inflated;
}

/**
 * Make `socket`'s receiver inflate through decompressUnlessWaiting. A receiver not shaped as
 * this module expects (another version of ws) is left as it is, and inflates every frame it
 * parses: test/deflate/deflate-held-per-connection.test.ts fails then.
 */
function gateInflating(socket: TransportSocket): void {
  const receiver = (socket as unknown as { _receiver?: InflatingReceiver | null })._receiver;
  if (!receiver) return;
  const own = Object.getPrototypeOf(receiver) as Partial<InflatingReceiver> | null;
  if (typeof own?.decompress !== 'function') return;
  if (!findReceiverSocketKey(receiver, socket)) return;
  receiverDecompress ??= own.decompress;
  receiver.decompress = decompressUnlessWaiting;
}

/**
 * ws's Receiver, as far as counting what it holds of a message still arriving reaches: its
 * parse state (ws's GET_MASK, GET_DATA, INFLATING), the frame being read, the message's
 * fragments so far (compressed lengths in `_totalPayloadLength`, inflated ones in
 * `_messageLength`), the bytes read and not parsed, and the chunks its Writable queues while it
 * inflates.
 */
interface ReceivingFields {
  _bufferedBytes: number;
  _fragments: unknown[];
  _totalPayloadLength: number;
  _messageLength: number;
  _payloadLength: number;
  _state: number;
  _opcode: number;
  _compressed: boolean;
  writableLength: number;
  _write(chunk: Buffer, encoding: BufferEncoding, cb: (err?: Error | null) => void): void;
}

/** ws's Receiver states in which the frame being read has its length counted but no data taken. */
const RECEIVER_GET_MASK = 3;
const RECEIVER_GET_DATA = 4;
/** ws's Receiver state while a compressed frame, taken from its buffers, is inflated (or waits). */
const RECEIVER_INFLATING = 5;

/**
 * The bytes ws's receiver holds of the message still arriving: those read and not parsed (a
 * frame arriving slowly waits there whole until its last byte), the fragments of the message
 * parsed so far (inflated, when compressed), a compressed frame being inflated or waiting to
 * be (waitToInflate), and the chunks queued behind it. Undefined for a receiver not shaped as
 * ws 8's: then nothing of it is counted (see countReceiving).
 */
export function receiverHeldBytes(receiver: unknown): number | undefined {
  const r = receiver as Partial<ReceivingFields> | null | undefined;
  if (
    typeof r?._bufferedBytes !== 'number' ||
    typeof r._totalPayloadLength !== 'number' ||
    typeof r._messageLength !== 'number' ||
    typeof r._payloadLength !== 'number' ||
    typeof r._state !== 'number' ||
    typeof r._opcode !== 'number' ||
    typeof r.writableLength !== 'number' ||
    !Array.isArray(r._fragments)
  ) {
    return undefined;
  }
  const state = r._state;
  let fragments: number;
  if (r._compressed === true) {
    fragments = r._messageLength + (state === RECEIVER_INFLATING ? r._payloadLength : 0);
  } else {
    // A data frame's length is added to the total at its header, before its bytes are taken.
    const reading =
      (state === RECEIVER_GET_MASK || state === RECEIVER_GET_DATA) && r._opcode < 8
        ? r._payloadLength
        : 0;
    fragments = r._totalPayloadLength - reading;
  }
  // Each fragment is a Buffer of its own: a thousand one-byte fragments hold far more than a
  // thousand bytes.
  fragments += r._fragments.length * FRAGMENT_OVERHEAD_BYTES;
  return r._bufferedBytes + fragments + r.writableLength;
}

/** What one fragment of a message still arriving holds beyond its bytes (its Buffer). */
export const FRAGMENT_OVERHEAD_BYTES = 128;

/** ws's own `_write` (Receiver.prototype), which writeCounted runs before reporting. */
let receiverWrite: ReceivingFields['_write'] | undefined;

/**
 * A receiver's `_write` on a connection that reports to the node-wide budget: each chunk read,
 * once ws has parsed what it could of it, the transport reports what it holds, the part of a
 * message still arriving included (a frame of maxMessageBytes sent slowly is held whole until
 * its last byte).
 */
function writeCounted(
  this: ReceivingFields,
  chunk: Buffer,
  encoding: BufferEncoding,
  cb: (err?: Error | null) => void,
): void {
  receiverWrite!.call(this, chunk, encoding, cb);
  const socket = (this as unknown as Record<symbol, TransportSocket | undefined>)[
    receiverSocketKey!
  ];
  socket?.rpcTransport?.reportInput();
}

/** The key of `receiver`'s WebSocket among its symbol fields (ws's kWebSocket), once found. */
function findReceiverSocketKey(receiver: object, socket: TransportSocket): boolean {
  const fields = receiver as Record<symbol, unknown>;
  if (receiverSocketKey === undefined || fields[receiverSocketKey] !== socket) {
    receiverSocketKey = Object.getOwnPropertySymbols(receiver).find(
      (key) => fields[key] === socket,
    );
  }
  return receiverSocketKey !== undefined;
}

/** ws's own `dataMessage` (Receiver.prototype), which dataMessageCounted runs after counting. */
let receiverDataMessage: FragmentingReceiver['dataMessage'] | undefined;

/**
 * ws's Receiver, as far as counting a message's frames reaches: whether the frame just read is
 * the message's last, and how many data frames the message came in (counted by ws against its
 * maxFragments), handed over by `dataMessage` at each data frame's end.
 */
interface FragmentingReceiver {
  _fin: boolean;
  _numFragments: number;
  dataMessage(cb: (err?: Error | null) => void): void;
}

/**
 * Per transport, the frames of its messages read in more than one, beyond one each, not charged
 * yet (see chargeFragments); only transports with such frames have an entry.
 */
const uncharged = new WeakMap<WsTransport, number>();

/**
 * A receiver's `dataMessage`: the frames of a message that came in several are counted before
 * ws hands the message over, so that each frame costs the input budget what a message does
 * (16,384 empty frames make one message that costs their parsing, not one message's).
 */
function dataMessageCounted(this: FragmentingReceiver, cb: (err?: Error | null) => void): void {
  if (this._fin && this._numFragments > 1) {
    const socket = (this as unknown as Record<symbol, TransportSocket | undefined>)[
      receiverSocketKey!
    ];
    const transport = socket?.rpcTransport;
    if (transport)
      uncharged.set(transport, (uncharged.get(transport) ?? 0) + this._numFragments - 1);
  }
  receiverDataMessage!.call(this, cb);
}

/**
 * Make `socket`'s receiver count the frames of fragmented messages (dataMessageCounted). A
 * receiver not shaped as ws 8's is left as it is: a message then costs one message however
 * many frames it came in (ws's maxFragments bounds them).
 */
function countFragments(socket: TransportSocket): void {
  const receiver = (socket as unknown as { _receiver?: Partial<FragmentingReceiver> | null })
    ._receiver;
  if (!receiver || typeof receiver._numFragments !== 'number') return;
  const own = Object.getPrototypeOf(receiver) as Partial<FragmentingReceiver> | null;
  if (typeof own?.dataMessage !== 'function' || !findReceiverSocketKey(receiver, socket)) return;
  receiverDataMessage ??= own.dataMessage;
  if (receiverDataMessage !== own.dataMessage) return;
  receiver.dataMessage = dataMessageCounted;
}

/**
 * Make `socket`'s receiver report each chunk it parses (writeCounted). A receiver not shaped as
 * this module expects (another version of ws) is left as it is: the message still arriving is
 * then not counted toward the node's total, only bounded per connection by maxMessageBytes
 * (ws's maxPayload); test/limits/unfinished-input-ws.test.ts covers both.
 */
function countReceiving(socket: TransportSocket): boolean {
  const receiver = (socket as unknown as { _receiver?: ReceivingFields | null })._receiver;
  if (!receiver || receiverHeldBytes(receiver) === undefined) return false;
  const own = Object.getPrototypeOf(receiver) as Partial<ReceivingFields> | null;
  if (typeof own?._write !== 'function' || !findReceiverSocketKey(receiver, socket)) return false;
  receiverWrite ??= own._write;
  if (receiverWrite !== own._write) return false;
  receiver._write = writeCounted;
  return true;
}

function headerLength(payloadLength: number): number {
  return payloadLength < 126 ? 2 : payloadLength < 65_536 ? 4 : 10;
}

/** Write the header of an unmasked, final text frame (RFC 6455 5.2); returns the offset after it. */
function writeHeader(buffer: Buffer, offset: number, length: number, opcode = 0x81): number {
  buffer[offset] = opcode; // FIN + text (0x81) or binary (0x82)
  if (length < 126) {
    buffer[offset + 1] = length;
    return offset + 2;
  }
  if (length < 65_536) {
    buffer[offset + 1] = 126;
    buffer.writeUInt16BE(length, offset + 2);
    return offset + 4;
  }
  buffer[offset + 1] = 127;
  buffer.writeUInt32BE(Math.floor(length / 2 ** 32), offset + 2);
  buffer.writeUInt32BE(length >>> 0, offset + 6);
  return offset + 10;
}

/** A whole text frame (what a server sends: unmasked, final) around `payload`. */
function textFrame(payload: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(headerLength(payload.length) + payload.length);
  frame.set(payload, writeHeader(frame, 0, payload.length));
  return frame;
}

/** A whole binary frame around `payload`. */
function binaryFrame(payload: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(headerLength(payload.length) + payload.length);
  frame.set(payload, writeHeader(frame, 0, payload.length, 0x82));
  return frame;
}

/** What a codec cannot encode (see codec.ts encodeOutgoing) comes back, not thrown. */
type Encoded<T> = T | UnencodableMessageError;

interface BinaryBuilders {
  /** The payload, throwing for a frame the codec cannot encode (used once `payload` took it). */
  encode: (bytes: Uint8Array) => Uint8Array;
  payload: (bytes: Uint8Array) => Encoded<Uint8Array>;
  frame: (bytes: Uint8Array) => Encoded<Buffer>;
}

/**
 * `encode(arg)`, or the UnencodableMessageError it throws: returned, so that a fan-out frame's
 * cached form (EncodedFrame.wire) is the refusal for every socket, and nothing is thrown out of
 * a send.
 */
function encoded<A, T>(encode: (arg: A) => T, arg: A): Encoded<T> {
  try {
    return encode(arg);
  } catch (err) {
    if (err instanceof UnencodableMessageError) return err;
    throw err;
  }
}

/**
 * Per codec, the builders of a fan-out frame's binary forms (payload; whole WebSocket frame):
 * the same functions for every socket, so EncodedFrame.wire encodes a broadcast once per
 * encoding, not once per subscriber. Weak: a gateway's codecs are its own (withValueCap), and
 * go with it once it is closed.
 */
const binaryBuilders = new WeakMap<WireCodec, BinaryBuilders>();

function buildersOf(codec: WireCodec): BinaryBuilders {
  let builders = binaryBuilders.get(codec);
  if (!builders) {
    const encode = (bytes: Uint8Array): Uint8Array => jsonBytesToBinary(codec, bytes);
    const payload = (bytes: Uint8Array): Encoded<Uint8Array> => encoded(encode, bytes);
    builders = {
      encode,
      payload,
      frame: (bytes) => {
        const built = payload(bytes);
        return built instanceof UnencodableMessageError ? built : binaryFrame(built);
      },
    };
    binaryBuilders.set(codec, builders);
  }
  return builders;
}

/**
 * A connection's encoding: a binary codec (its frames are binary; a text frame closes 1003),
 * or JSON, whose binary frames close 1003 ('refuse': JSON travels in text frames, and a
 * binary one is a client that believes it negotiated a binary encoding, or is confused) or,
 * for clients known to send JSON in binary frames, are read as UTF-8 text ('text', the
 * gateway's `binaryJsonFrames`; one that is not UTF-8 closes 1007, as such a text frame does).
 */
export type WsEncoding =
  { codec: WireCodec; maxDepth: number } | { binaryFrames: 'text' | 'refuse' };

const JSON_TEXT: WsEncoding = { binaryFrames: 'refuse' };

const EMPTY = Buffer.alloc(0);

/**
 * What every transport of one server has alike: one object for all of them, where four fields
 * in each would cost 32 bytes a connection.
 */
interface WsShared {
  /** Message counts, shared by all of a server's transports, for metrics. */
  readonly counters: { messagesIn: number; messagesOut: number };
  readonly closeGraceMs: number;
  /** Stop reading while more than this many bytes are queued for the peer; 0 never stops. */
  readonly maxBufferedBytes: number;
  /** The gateway's compressor of broadcasts, when compression is on. */
  readonly deflate: SharedDeflate | undefined;
  /**
   * The least bytes an incoming message costs the input budget (limits.messageCostBytes); on a
   * connection that negotiated permessage-deflate, DEFLATE_MESSAGE_COST_FACTOR times this.
   */
  readonly messageCost: number;
  /** The node-wide output budget the transports that joined one (flag BUDGETED) report to. */
  budget?: BudgetLedger;
}

/**
 * The settings transports were last made with, by their counters (one object per gateway): the
 * next one made with the same shares them. Weakly held, so a gateway gone leaves nothing here.
 */
const sharedByCounters = new WeakMap<WsShared['counters'], WsShared>();

function sharedOf(
  counters: WsShared['counters'],
  closeGraceMs: number,
  maxBufferedBytes: number,
  deflate: SharedDeflate | undefined,
  messageCost: number,
): WsShared {
  const last = sharedByCounters.get(counters);
  if (
    last !== undefined &&
    last.closeGraceMs === closeGraceMs &&
    last.maxBufferedBytes === maxBufferedBytes &&
    last.deflate === deflate &&
    last.messageCost === messageCost
  ) {
    return last;
  }
  const shared: WsShared = { counters, closeGraceMs, maxBufferedBytes, deflate, messageCost };
  sharedByCounters.set(counters, shared);
  return shared;
}

/** WsTransport's flags, one small integer (a boolean field costs a word per connection). */
const CORKED = 1; // the socket is corked: something besides gathered text was written since the last flush
const FLUSH_DUE = 2; // registered with turn-coalescer: flushWrites runs once the current task is done
const PING_UNANSWERED = 4; // the heartbeat's latest ping has not been answered (see `alive`)
const DEFLATE = 8; // the socket negotiated permessage-deflate
const SHARED_DEFLATE = 16; // it can take the broadcasts compressed once for all (SharedDeflate.accepts)
const BUDGETED = 32; // it reports to the node-wide output budget (shared.budget)
const INPUT_HELD = 64; // reading was paused for the input budget, or held turns, since the latest ping (see pongMayBeUnread)
const HELD_QUEUED = 128; // its held messages wait for a turn (queueHeld); reading waits for them
const OUTPUT_WAITING = 256; // frames it sent wait for an output turn (waitingOutputs, queueOutput); reading waits for them
// The bits above these count the frames sent since the last flush (MAX_GATHERED_FRAMES): a
// counter in the flags rather than a field, which every idle connection would carry. The flags
// above all stay below GATHERED_ONE.
const GATHERED_ONE = 512;
const GATHERED_MASK = ~(GATHERED_ONE - 1);

/** Incoming texts not handled yet, the index of the next, and the characters of those left. */
interface Held {
  texts: string[];
  from: number;
  chars: number;
}

/** Bytes gathered under one cork before they are written anyway. */
const MAX_CORKED_BYTES = 64 * 1024;

/**
 * What a connection's output waits with (WaitingOutput), and the close asked for meanwhile,
 * which goes after it.
 */
interface WaitingWithClose extends WaitingOutput {
  close?: [code: number, reason: string];
}

/** Kept apart from the connections: few ever have output waiting (OUTPUT_WAITING). */
const waitingOutputs = new WeakMap<WsTransport, WaitingWithClose>();

/**
 * Server-side adapter over a `ws` WebSocket, carrying JSON text frames or, with a codec,
 * MessagePack or CBOR binary frames (see WsEncoding).
 * A close whose handshake does not finish within `closeGraceMs` (a peer that
 * stopped reading never sees our close frame) ends in `terminate()`, so a
 * stalled socket's buffers are freed in bounded time.
 *
 * Read-side back-pressure: once handling an incoming message leaves more than
 * `maxBufferedBytes` queued for the peer (a client that sends but does not read its
 * replies), the transport stops reading the socket until its write buffer has drained
 * to half of that. Messages `ws` had already parsed from the last chunk read are held
 * and handled, in order, when reading resumes; with permessage-deflate, `ws` inflates none of
 * the frames after them meanwhile (decompressUnlessWaiting), so what is held is what was read,
 * and one inflated message. What `ws` holds to compress counts as queued too, and the wait
 * follows it as `ws` writes it (whenDrained's upstream).
 *
 * Input budget (`inputLimit`): a connection that sends more bytes than its budget allows has
 * its socket paused the same way, until the budget has refilled. The two pauses are separate
 * reasons: reading resumes once neither holds. Each message costs its bytes, and at least
 * `messageCostBytes` (DEFLATE_MESSAGE_COST_FACTOR times that with permessage-deflate): a text
 * or binary message, a ping or pong the peer sends, and each member of a batch after the first
 * (chargeMessages, told by the peer once it has parsed the batch). A message in a binary
 * encoding costs the larger of its bytes and its JSON text's (binaryMessageCost).
 */
export class WsTransport
  implements ServerTransport, BudgetMember, InputReader, HeldTurnTaker, WaitingOutputWriter
{
  // Getters, not fields: nothing more to store per connection.
  get kind(): 'websocket' {
    return 'websocket';
  }
  get canPush(): boolean {
    return true;
  }
  private listener: TransportListener | undefined;
  /**
   * CORKED, FLUSH_DUE, PING_UNANSWERED, DEFLATE, SHARED_DEFLATE, BUDGETED, INPUT_HELD,
   * HELD_QUEUED, OUTPUT_WAITING.
   */
  private flags = 0;
  private readonly shared: WsShared;
  /**
   * Text frames gathered since the last flush, joined into one buffer when they are written:
   * the first alone as a string (a lone reply allocates no array), an array from the second on.
   */
  private textQueue: string | string[] | undefined;
  private textQueueLength = 0;
  /** Incoming texts not handled yet: before `listen`, or while reading is paused. */
  private held: Held | undefined;
  /**
   * While reading is paused, what stops the wait for the write buffer to drain; once closing,
   * the timer that ends a close the peer does not answer. One field: a socket is paused only
   * before it closes (close stops the wait first).
   */
  private waiting: (() => void) | ReturnType<typeof setTimeout> | undefined;
  private get cancelResume(): (() => void) | undefined {
    const waiting = this.waiting;
    return typeof waiting === 'function' ? waiting : undefined;
  }
  private set cancelResume(cancel: (() => void) | undefined) {
    // Clearing it leaves a close timer alone.
    if (cancel !== undefined || typeof this.waiting === 'function') this.waiting = cancel;
  }
  private get closeTimer(): ReturnType<typeof setTimeout> | undefined {
    const waiting = this.waiting;
    return typeof waiting === 'function' ? undefined : waiting;
  }
  /**
   * Cleared when the heartbeat pings, set again by the pong that answers that ping (the same
   * payload): a pong the peer sends on its own proves nothing, since a peer that does not read
   * never sees our ping (it waits behind everything queued before it).
   */
  get alive(): boolean {
    return (this.flags & PING_UNANSWERED) === 0;
  }
  set alive(alive: boolean) {
    this.setFlag(PING_UNANSWERED, !alive);
  }
  /**
   * Reading was paused for the input budget at some time since the heartbeat's latest ping: the
   * peer's pong may be waiting, unread, behind the messages it sent before it. Not a sign of a
   * dead peer (a peer that sends nothing is never paused for long: the pause only pays for
   * what it sent).
   */
  get pongMayBeUnread(): boolean {
    return (this.flags & INPUT_HELD) !== 0;
  }
  /** The payload of the heartbeat's latest ping to this socket (one buffer shared by a sweep). */
  private pingPayload: Buffer | undefined;
  /** BudgetMember: what this transport last reported to its budget. */
  budgeted = 0;
  /** JSON text frames unless the gateway set a binary codec (setEncoding). */
  private encoding: WsEncoding = JSON_TEXT;

  /**
   * Set when this socket negotiated permessage-deflate: frames at or above the threshold go
   * compressed (broadcasts as the frame compressed once for all, the rest through ws's own
   * deflate). Undefined: every frame goes as it is.
   */
  private get deflate(): SharedDeflate | undefined {
    return this.flags & DEFLATE ? this.shared.deflate : undefined;
  }

  /** Whether this socket can take the compressed broadcast frames (see SharedDeflate.accepts). */
  private get sharedDeflate(): boolean {
    return (this.flags & SHARED_DEFLATE) !== 0;
  }

  /**
   * ws's net.Socket, which it keeps private (and keeps after closing); corking it is how frames
   * sent together share a write. Read from the socket, not kept: a field per connection.
   */
  private get raw(): Duplex | undefined {
    return (this.socket as unknown as { _socket?: Duplex | null })._socket ?? undefined;
  }

  private setFlag(flag: number, on: boolean): void {
    this.flags = on ? this.flags | flag : this.flags & ~flag;
  }

  /** Write what was gathered and uncork (called by turn-coalescer, or at the 64 KiB cap). */
  flushWrites(): void {
    this.flags &= ~FLUSH_DUE & ~GATHERED_MASK;
    this.flushText();
    if (!(this.flags & CORKED)) return;
    this.flags &= ~CORKED;
    this.raw?.uncork();
  }

  /** Frame every text gathered into one buffer and write it: one allocation, one chunk. */
  private flushText(): void {
    const queue = this.textQueue;
    if (queue === undefined) return;
    this.textQueue = undefined;
    this.textQueueLength = 0;
    const raw = this.raw;
    if (this.socket.readyState !== this.socket.OPEN || !raw) return;
    if (typeof queue === 'string') {
      // One frame (a lone reply): written at once unless corked, no cork to take off.
      const length = Buffer.byteLength(queue);
      const buffer = Buffer.allocUnsafe(headerLength(length) + length);
      buffer.write(queue, writeHeader(buffer, 0, length), 'utf8');
      raw.write(buffer);
      return;
    }
    const lengths = new Array<number>(queue.length);
    let total = 0;
    for (let i = 0; i < queue.length; i++) {
      const length = Buffer.byteLength(queue[i]!);
      lengths[i] = length;
      total += headerLength(length) + length;
    }
    const buffer = Buffer.allocUnsafe(total);
    let offset = 0;
    for (let i = 0; i < queue.length; i++) {
      offset = writeHeader(buffer, offset, lengths[i]!);
      offset += buffer.write(queue[i]!, offset, 'utf8');
    }
    raw.write(buffer);
  }

  /** Gather `text` for the next flush; nothing is written before the current task is done. */
  private queueText(text: string): void {
    const queue = this.textQueue;
    if (queue === undefined) this.textQueue = text;
    else if (typeof queue === 'string') this.textQueue = [queue, text];
    else queue.push(text);
    this.textQueueLength += text.length;
  }

  /**
   * Before writing anything but gathered text (a broadcast frame, a frame `ws` builds): cork the
   * socket, so those writes too leave together when the current task is done.
   */
  private cork(raw: Duplex): void {
    if (this.flags & CORKED) return;
    this.flags |= CORKED;
    raw.cork();
  }

  /** Flush once the current task is done (turn-coalescer). */
  private scheduleFlush(): void {
    if (this.flags & FLUSH_DUE) return;
    this.flags |= FLUSH_DUE;
    flushAfterTask(this);
  }

  constructor(
    readonly socket: TransportSocket,
    /** Message counts, shared by all of a server's transports, for metrics. */
    counters: { messagesIn: number; messagesOut: number } = {
      messagesIn: 0,
      messagesOut: 0,
    },
    closeGraceMs = 2_000,
    /** Stop reading while more than this many bytes are queued for the peer; 0 never stops. */
    maxBufferedBytes = 0,
    /** The gateway's compressor of broadcasts, when compression is on. */
    deflate?: SharedDeflate,
    /** The bytes it may read (see InputLimit); undefined: no limit. */
    inputLimit?: InputLimit,
    /** The least an incoming message costs that budget (limits.messageCostBytes). */
    messageCostBytes = DEFAULT_MESSAGE_COST_BYTES,
  ) {
    this.shared = sharedOf(counters, closeGraceMs, maxBufferedBytes, deflate, messageCostBytes);
    // The socket reports to this transport through its own emit (TransportSocket).
    socket.rpcTransport = this;
    socket.inputLimit = inputLimit;
    if (inputLimit !== undefined) countFragments(socket);
    if (deflate) this.useDeflate(deflate);
  }

  private useDeflate(deflate: SharedDeflate): void {
    // ws keeps the negotiated extensions private; set before the socket is handed over.
    const extensions = (
      this.socket as unknown as { _extensions?: Record<string, { params?: object }> }
    )._extensions;
    const negotiated = extensions?.['permessage-deflate'];
    if (negotiated === undefined) return;
    this.flags |= DEFLATE;
    gateInflating(this.socket);
    if (deflate.accepts(negotiated.params)) this.flags |= SHARED_DEFLATE;
  }

  /** The connection's encoding, from its subprotocol: set before the session reads or writes. */
  setEncoding(encoding: WsEncoding): void {
    this.encoding = encoding;
  }

  /** Heartbeat: ping the peer with `payload`; only a pong carrying it counts as an answer. */
  ping(payload: Buffer): void {
    this.alive = false;
    // Still paused (or reading on only once what it held is handed over, in turns): the pong
    // to this ping cannot be read before reading resumes.
    this.setFlag(
      INPUT_HELD,
      this.inputPaused || (this.flags & (HELD_QUEUED | OUTPUT_WAITING)) !== 0,
    );
    this.pingPayload = payload;
    this.socket.ping(payload);
  }

  /** @internal */
  onPong(data: Buffer): void {
    const expected = this.pingPayload;
    if (expected !== undefined && expected.equals(data)) this.alive = true;
    this.spendControl(data);
  }

  /** @internal A ping from the peer (TransportSocket answers it): it costs the input budget. */
  onPing(data: Buffer): void {
    this.spendControl(data);
  }

  /** A control frame read costs the input budget as a message does. */
  private spendControl(data: Buffer): void {
    const input = this.socket.inputLimit;
    if (input !== undefined) this.spendMessage(input, data.length);
  }

  /**
   * One message read: its bytes, at least the floor (however few its bytes, a message costs
   * what reading and answering one does). True when reading must pause for the budget.
   */
  private spendMessage(input: InputLimit | InputReading, bytes: number): boolean {
    const floor = this.messageCost;
    return this.spendInput(input, bytes > floor ? bytes : floor);
  }

  /**
   * The frames of the messages read in several, beyond one each (dataMessageCounted): the
   * floor each. True when reading must pause for the budget.
   */
  private chargeFragments(input: InputLimit | InputReading): boolean {
    const frames = uncharged.get(this);
    if (frames === undefined) return false;
    uncharged.delete(this);
    return this.spendInput(input, frames * this.messageCost);
  }

  /**
   * A binary message turned into `text`: what handling that text costs beyond what its frame
   * was charged (see binaryMessageCost). Read after the conversion, before the text is handled.
   * True when reading must pause for the budget.
   */
  private spendConverted(bytes: number, text: string): boolean {
    // The frame's spend made the connection's budget (InputReading) in place of its limit.
    const input = this.socket.inputLimit;
    if (input === undefined) return false;
    const floor = this.messageCost;
    const beyond = binaryMessageCost(bytes, text, floor) - (bytes > floor ? bytes : floor);
    return beyond > 0 && this.spendInput(input, beyond);
  }

  /**
   * The least an incoming message costs the input budget: limits.messageCostBytes, or
   * DEFLATE_MESSAGE_COST_FACTOR times that on a connection that negotiated permessage-deflate.
   */
  private get messageCost(): number {
    const cost = this.shared.messageCost;
    return this.flags & DEFLATE ? cost * DEFLATE_MESSAGE_COST_FACTOR : cost;
  }

  /**
   * Count `count` more incoming messages against the input budget, at the least a message costs
   * each: the members of a batch after the first, known only once the peer has parsed it (the
   * frame was counted as one). Past the budget, what follows waits as after any message.
   */
  chargeMessages(count: number): void {
    const input = this.socket.inputLimit;
    if (input !== undefined && count > 0) this.spendInput(input, count * this.messageCost);
  }

  /**
   * Count `bytes` more against the input budget: work a message asked of the gateway beyond
   * reading it (Transport.chargeBytes). Past the budget, what follows waits as after any message.
   */
  chargeBytes(bytes: number): void {
    const input = this.socket.inputLimit;
    if (input !== undefined && bytes > 0) this.spendInput(input, bytes);
  }

  /** Report to the node-wide output budget from now on (GatewayLimits.maxBufferedBytesTotal). */
  joinBudget(budget: BudgetLedger): void {
    this.shared.budget = budget;
    this.flags |= BUDGETED;
    countReceiving(this.socket);
  }

  /** @internal ws has parsed a chunk read (writeCounted): report what is held now. */
  reportInput(): void {
    this.budget?.report(this, this.budgetBytes);
  }

  /**
   * @internal Bytes ws holds of the message still arriving (receiverHeldBytes); 0 for a
   * receiver of another shape.
   */
  get receivingBytes(): number {
    return receiverHeldBytes((this.socket as unknown as { _receiver?: unknown })._receiver) ?? 0;
  }

  /** The node-wide output budget this transport reports to, once it has joined one. */
  private get budget(): BudgetLedger | undefined {
    return this.flags & BUDGETED ? this.shared.budget : undefined;
  }

  /**
   * BudgetMember: bytes queued for the peer and characters of incoming messages held, or 0 once
   * closing (the buffers go with the socket, what was held is dropped). Held messages count: a
   * connection holds at most the one that made it wait and the rest of the read it came in
   * (waitsToInflate), but that one can be maxMessageBytes of JSON text, six times it and more
   * for MessagePack, and every connection of the node may hold one. So does the message still
   * arriving, which ws holds until its last byte (receivingBytes): maxMessageBytes a connection.
   */
  get budgetBytes(): number {
    if (this.socket.readyState !== this.socket.OPEN) return 0;
    return this.bufferedAmount + (this.held?.chars ?? 0) + this.receivingBytes;
  }

  /**
   * @internal Whether ws holds a compressed frame of this connection that it inflates only once
   * the connection reads on (waitsToInflate).
   */
  get frameWaiting(): boolean {
    return waitingInflates.has(this);
  }

  /** @internal Characters of the incoming messages read and not handed to the session yet. */
  get heldInputChars(): number {
    return this.held?.chars ?? 0;
  }

  /** Bytes queued for the peer, or 0 once closing: what read-side back-pressure weighs. */
  private get queuedBytes(): number {
    return this.socket.readyState === this.socket.OPEN ? this.bufferedAmount : 0;
  }

  /** @internal */
  onSocketMessage(data: RawData, isBinary = false): void {
    // Closing (the gateway closed it, or the peer did): nothing more it sends is handled, nor
    // decoded. Its answers could not be sent, and its input budget no longer pauses reading
    // (the peer's close frame must be read), so handling it would be parsing without a bound.
    if (this.closeStarted) return;
    this.shared.counters.messagesIn++;
    const input = this.socket.inputLimit;
    const bytes = byteLengthOf(data);
    let throttled = input !== undefined && this.spendMessage(input, bytes);
    if (input !== undefined) throttled = this.chargeFragments(input) || throttled;
    const text = this.textOf(data, isBinary);
    if (text === undefined) return;
    if (input !== undefined && 'codec' in this.encoding) {
      throttled = this.spendConverted(bytes, text) || throttled;
    }
    // `ws` hands over every message of a chunk it has read, paused or not: keep them in order.
    // The message that takes the budget past its end waits too: it is what would cost.
    if (
      this.held !== undefined ||
      !this.listener ||
      this.cancelResume ||
      throttled ||
      this.flags & OUTPUT_WAITING
    ) {
      return this.hold(text);
    }
    // Past this turn's allowance, all connections together: it waits for a held turn.
    if (!directDeliveryAllowed()) {
      this.hold(text);
      // Its pong, if any, is read only once what it holds is handed over (see ping).
      this.flags |= INPUT_HELD;
      return this.deliverHeld();
    }
    this.listener.receive(text);
    this.checkBackPressure();
  }

  /** Keep `text` to hand over once the session can take it, behind what is held already. */
  private hold(text: string): void {
    const held = (this.held ??= { texts: [], from: 0, chars: 0 });
    held.texts.push(text);
    held.chars += text.length;
    this.budget?.report(this, this.budgetBytes);
  }

  /** The JSON text of an incoming message; undefined when its frame type closed the connection. */
  private textOf(data: RawData, isBinary: boolean): string | undefined {
    const encoding = this.encoding;
    if ('codec' in encoding) {
      if (!isBinary) {
        this.close(CloseCode.UnsupportedData, `text frame on a ${encoding.codec.name} connection`);
        return undefined;
      }
      return binaryToText(encoding.codec, bytesOf(data), encoding.maxDepth);
    }
    if (!isBinary) return bytesOf(data).toString('utf8'); // ws has checked it is UTF-8
    if (encoding.binaryFrames === 'refuse') {
      this.close(CloseCode.UnsupportedData, 'binary frame on a JSON connection');
      return undefined;
    }
    const text = strictUtf8(bytesOf(data));
    if (text === undefined) this.close(INVALID_PAYLOAD, 'invalid UTF-8');
    return text;
  }

  /**
   * Count `bytes` read against the input budget; past it, stop reading until it has refilled.
   * The budget is made at the first message: a connection that never sends holds none. Returns
   * whether reading is paused for the budget.
   */
  private spendInput(limit: InputLimit | InputReading, bytes: number): boolean {
    const input =
      limit instanceof InputReading
        ? limit
        : (this.socket.inputLimit = new InputReading(limit, limit.budget(this)));
    const wait = input.budget.spend(bytes);
    // Already paused: the timer looks at the budget again when it fires.
    if (input.timer !== undefined) return true;
    // Closing: the peer's close frame must still be read.
    if (wait === 0 || this.socket.readyState !== this.socket.OPEN) return false;
    this.socket.pause();
    this.flags |= INPUT_HELD;
    input.timer = setTimeout(() => this.resumeInput(), wait);
    input.timer.unref();
    return true;
  }

  /**
   * @internal InputReader: another connection put the budget this one shares in debt. Stop
   * reading until it has refilled (a wait already under way goes on).
   */
  sharedBudgetInDebt(): void {
    const input = this.socket.inputLimit;
    if (input instanceof InputReading) this.spendInput(input, 0);
  }

  /** The input budget's timer: read on if it has refilled, else wait for what is still owed. */
  private resumeInput(): void {
    const input = this.socket.inputLimit;
    if (!(input instanceof InputReading)) return;
    const wait = input.budget.spend(0);
    if (wait > 0) {
      input.timer = setTimeout(() => this.resumeInput(), wait);
      input.timer.unref();
      return;
    }
    input.timer = undefined;
    this.deliverHeld();
    this.readOn();
  }

  /**
   * Resume reading unless something still holds it: held messages waiting for their turns
   * (handHeld reads on once they are handed over), the output's pause, the input budget's.
   * The budget is looked at again: while held messages were handed over in turns, the other
   * connections of its address may have put the address's budget in debt, and a read more now
   * would only deepen it (a 64 KiB read is handled whatever it costs).
   */
  private readOn(): void {
    if (this.flags & (HELD_QUEUED | OUTPUT_WAITING) || this.cancelResume || this.inputPaused)
      return;
    const input = this.socket.inputLimit;
    if (input instanceof InputReading && this.spendInput(input, 0)) return;
    this.socket.resume();
  }

  /** True while reading is paused because the connection sent more than its input budget. */
  get inputPaused(): boolean {
    const input = this.socket.inputLimit;
    return input instanceof InputReading && input.timer !== undefined;
  }

  private stopInputPause(): void {
    const input = this.socket.inputLimit;
    if (!(input instanceof InputReading) || input.timer === undefined) return;
    clearTimeout(input.timer);
    input.timer = undefined;
  }

  /** @internal */
  onSocketClose(code: number, reason: Buffer): void {
    clearTimeout(this.closeTimer);
    if (this.flags & OUTPUT_WAITING) this.endWaitingOutput(); // dropped, as the socket's buffer
    this.budget?.leave(this);
    this.stopWaitingToResume();
    this.stopInputPause();
    // Once: the limit of an address group counts its open connections.
    const input = this.socket.inputLimit;
    this.socket.inputLimit = undefined;
    if (input instanceof InputReading) input.budget.close?.();
    (input instanceof InputReading ? input.limit : input)?.release?.();
    this.dropHeld();
    this.listener?.transportClosed(code, reason.toString('utf8'));
  }

  /** True while reading is paused because the peer has not read what it was sent. */
  get readingPaused(): boolean {
    return this.cancelResume !== undefined;
  }

  /** After a message was handled: stop reading if the peer has fallen too far behind. */
  private checkBackPressure(): void {
    const limit = this.shared.maxBufferedBytes;
    if (limit <= 0 || this.cancelResume) return;
    const buffered = this.queuedBytes; // 0 once closing: nothing more is read anyway
    this.budget?.report(this, this.budgetBytes);
    if (buffered <= limit) return;
    const raw = this.raw;
    if (!raw) return; // nothing to wait on: never pause what could not be resumed
    this.socket.pause();
    // Made only when pausing: a connection that keeps up allocates nothing for this.
    this.cancelResume = whenDrained(
      raw,
      () => this.bufferedAmount,
      limit / 2,
      () => this.resumeReading(),
      this.upstream,
    );
  }

  private resumeReading(): void {
    this.cancelResume = undefined;
    this.budget?.report(this, this.budgetBytes);
    this.deliverHeld();
    // The input budget's pause, if any, resumes reading itself once it has refilled.
    this.readOn();
  }

  private stopWaitingToResume(): void {
    this.cancelResume?.();
    this.cancelResume = undefined;
  }

  /**
   * Have held messages handed over, in order, in the next turns (queueHeld, handHeld), when the
   * session can take them; with none held, let ws inflate the frame it waits on if nothing
   * waits any more.
   */
  private deliverHeld(): void {
    if (this.flags & HELD_QUEUED) return; // its turn comes
    if (this.held !== undefined && this.mayHandHeld) {
      // Nothing more is read before they are handed over (readOn): what arrives meanwhile
      // would be held behind them, without a bound on a connection with no input budget.
      this.socket.pause();
      this.flags |= HELD_QUEUED;
      queueHeld(this);
      return;
    }
    if (!this.waitsToInflate) this.inflateWaiting();
  }

  /** Held messages may go to the session: it listens, and reading is not paused. */
  private get mayHandHeld(): boolean {
    return (
      this.listener !== undefined &&
      !this.cancelResume &&
      !this.inputPaused &&
      (this.flags & OUTPUT_WAITING) === 0
    );
  }

  /**
   * @internal This connection's turn (handHeldTurn): hand the session up to `most` held
   * messages in order, stopping early if reading pauses again; queue for the next turn if more
   * are left, else read on. Returns how many it handed over.
   */
  handHeld(most: number): number {
    this.flags &= ~HELD_QUEUED;
    const held = this.held;
    if (held === undefined) return 0;
    // The answers to the previous turn's messages are queued by now (a handler's result is
    // sent once its promise settles): a peer that does not read them stops this turn.
    this.checkBackPressure();
    const texts = held.texts;
    let handed = 0;
    while (handed < most && held.from < texts.length && this.mayHandHeld && !heldOutputSpent()) {
      const text = texts[held.from]!;
      texts[held.from++] = '';
      held.chars -= text.length;
      handed++;
      this.listener!.receive(text);
      if (this.held !== held) return handed; // closed meanwhile (close lets ws inflate on)
      this.checkBackPressure();
    }
    if (held.from >= texts.length) this.dropHeld();
    this.budget?.report(this, this.budgetBytes);
    this.deliverHeld();
    this.readOn();
    return handed;
  }

  /**
   * Whether ws is to inflate no further frame of this connection: its messages wait (held, or
   * not listened to yet) or reading is paused. Then what it holds of them is what it had when it
   * paused, and at most the one message that made it pause (one compressed read can carry
   * dozens that each inflate to maxMessageBytes). Once closing, ws reads on to the peer's close.
   */
  private get waitsToInflate(): boolean {
    return (
      this.socket.readyState === this.socket.OPEN &&
      (this.held !== undefined ||
        this.cancelResume !== undefined ||
        this.inputPaused ||
        this.listener === undefined ||
        (this.flags & OUTPUT_WAITING) !== 0)
    );
  }

  /**
   * @internal ws's receiver is about to inflate `data` (decompressUnlessWaiting): true when it
   * is to wait, kept here until this transport reads on (or its socket closes).
   */
  waitToInflate(
    // Spelled out, not InflatingReceiver: the API report would name a type the entry does not export.
    receiver: { decompress(data: Buffer, cb: (err?: Error | null) => void): void },
    data: Buffer,
    cb: (err?: Error | null) => void,
  ): boolean {
    if (!this.waitsToInflate && !this.closingInflatesSpent()) return false;
    const onClose = (): void => this.inflateWaiting();
    waitingInflates.set(this, { receiver, data, cb, onClose });
    this.raw?.once('close', onClose);
    return true;
  }

  /**
   * Closing, ws reads on to the peer's close frame, inflating what comes before it, which the
   * connection no longer handles (nor charges): at most CLOSING_INFLATES frames, then the rest
   * waits and the close's grace ends the connection. True once they are spent.
   */
  private closingInflatesSpent(): boolean {
    if (this.socket.readyState === this.socket.OPEN) return false;
    const inflated = closingInflates.get(this) ?? 0;
    if (inflated >= CLOSING_INFLATES) return true;
    closingInflates.set(this, inflated + 1);
    return false;
  }

  /** Let ws inflate the frame it waits on, if any (and parse on past it). */
  private inflateWaiting(): void {
    const waiting = waitingInflates.get(this);
    if (waiting === undefined) return;
    waitingInflates.delete(this);
    this.raw?.off('close', waiting.onClose);
    receiverDecompress!.call(waiting.receiver, waiting.data, waiting.cb);
  }

  private dropHeld(): void {
    this.held = undefined;
  }

  get bufferedAmount(): number {
    const buffered = this.socket.bufferedAmount + this.textQueueLength;
    return this.flags & OUTPUT_WAITING ? buffered + waitingOutputs.get(this)!.chars : buffered;
  }

  listen(listener: TransportListener): void {
    this.listener = listener;
    this.deliverHeld();
  }

  /**
   * The close has begun (CLOSING or CLOSED, or asked for while output waits to go before it):
   * `send` drops what it is given.
   */
  get closeStarted(): boolean {
    return this.socket.readyState > this.socket.OPEN || this.closeWaits;
  }

  /** A close was asked for while output waits: it goes once that has been written. */
  private get closeWaits(): boolean {
    return (this.flags & OUTPUT_WAITING) !== 0 && waitingOutputs.get(this)!.close !== undefined;
  }

  /**
   * Send one frame: written now (gathered to the end of the task), or, once the text the
   * sessions sent in this turn has reached OUTPUT_CHARS_PER_TURN, in a later turn (queueOutput),
   * this connection's frames after it behind it, in order: what one connection's handlers answer
   * at once (async handlers settling together) does not hold the event loop for the others.
   */
  send(frame: string | EncodedFrame): void {
    if (this.flags & OUTPUT_WAITING) {
      if (this.socket.readyState === this.socket.OPEN) this.waitOutput(frame);
      return;
    }
    if (this.socket.readyState !== this.socket.OPEN) return;
    if (typeof frame === 'string' && outputSpent()) return this.waitOutput(frame);
    this.write(frame);
  }

  outputWaits(): boolean {
    return (this.flags & OUTPUT_WAITING) !== 0 || outputSpent();
  }

  chargeOutput(chars: number): void {
    countOutput(chars);
  }

  /** Transport.sendMade: `make`'s text is made as it is written, in its output turn if it waits. */
  sendMade(make: () => string | undefined, written?: () => void): void {
    if (this.socket.readyState !== this.socket.OPEN) return;
    if (this.flags & OUTPUT_WAITING || outputSpent()) {
      this.waitOutput(() => this.writeMade(make, written));
    } else this.writeMade(make, written);
  }

  private writeMade(make: () => string | undefined, written: (() => void) | undefined): true {
    const text = make();
    if (text !== undefined) this.write(text);
    written?.();
    return true;
  }

  /** Transport.sendPieces: pieces made and written as the turn allows, in fragments past it. */
  sendPieces(source: PieceSource, written?: () => void): void {
    if (this.socket.readyState !== this.socket.OPEN) return;
    if ('codec' in this.encoding && source.members === undefined) {
      // A binary encoding converts the whole message's text: it goes as one frame.
      let text = '';
      for (let piece = source.next(); piece !== undefined; piece = source.next()) text += piece;
      return this.sendMade(() => text, written);
    }
    const pieces: Pieces = { source, written, started: false };
    if (this.flags & OUTPUT_WAITING || !this.writePieces(pieces)) {
      this.waitOutput(() => this.writePieces(pieces));
    }
  }

  /**
   * Make and write the message's pieces while the turn's output allows: all of them, unless
   * it began already, as one frame; else what this turn made as the next fragment. Returns
   * whether the message is complete.
   */
  private writePieces(pieces: Pieces): boolean {
    const taken = takePieces(pieces);
    if (taken === undefined) return false;
    const first = !pieces.started;
    const encoding = this.encoding;
    if (taken.done && first) this.write(taken.text, true);
    else if ('codec' in encoding) {
      // A batch's reply converted member by member (its members given: see sendPieces).
      const members = pieces.source.members!;
      const bytes = arrayPartToBinary(encoding.codec, taken.parts, first, members);
      this.writeFragment(bytes, first, taken.done);
    } else this.writeFragment(taken.text, first, taken.done);
    pieces.started = true;
    if (taken.done) pieces.written?.();
    return taken.done;
  }

  /**
   * One fragment of a message (RFC 6455, 5.4), text or, with a binary encoding, binary, through
   * ws's sender, which numbers them (the message's opcode first, continuations after, FIN on the
   * last) and compresses them as one message; only control frames (a ping) go between them.
   */
  private writeFragment(data: string | Uint8Array, first: boolean, fin: boolean): void {
    const raw = this.raw;
    if (first) this.shared.counters.messagesOut++;
    if (raw) {
      this.scheduleFlush();
      this.cork(raw);
    }
    this.flushText(); // keep the order of frames
    this.socket.send(data, { binary: typeof data !== 'string', fin }, this.senderWritten());
    this.budget?.report(this, this.budgetBytes);
  }

  /**
   * Keep `frame` for an output turn, behind what waits already; a function is called in its
   * place (a frame made as it is written, an onWritten wait).
   */
  private waitOutput(frame: WaitingFrame): void {
    const waiting = waitingOutputs.get(this);
    if (waiting === undefined) {
      // Nothing more is read before it is written (readOn): a peer whose answers wait asks
      // for no more meanwhile, and its pong, if any, waits behind what it sent (see ping).
      this.flags |= OUTPUT_WAITING | INPUT_HELD;
      this.socket.pause();
      waitingOutputs.set(this, keepWaiting(undefined, frame, this));
    } else if (waiting.close !== undefined) {
      return; // closing: dropped, as after a close
    } else keepWaiting(waiting, frame, this);
    this.budget?.report(this, this.budgetBytes);
  }

  /**
   * @internal This connection's part of an output turn (writeOutputTurn): write what waits, in
   * order, while the turn's output allows; then the close asked for meanwhile, if any. Returns
   * whether nothing is left.
   */
  writeWaiting(): boolean {
    const waiting = waitingOutputs.get(this);
    if (waiting === undefined) return true;
    try {
      const open = () => this.socket.readyState === this.socket.OPEN;
      if (!writeWaitingFrames(waiting, open, (frame) => this.write(frame))) return false;
    } catch {
      // Nothing here throws (the frames are made by code that does not): should it, the
      // connection closes rather than wait for ever, and the turn goes on with the others.
      this.close(CloseCode.InternalError, 'output failed'); // drops what waits
      if (waitingOutputs.get(this) === waiting) this.endWaitingOutput(); // closed meanwhile
      return true;
    }
    if (waiting.close) {
      this.close(...waiting.close); // ends the wait, then closes
      if (waitingOutputs.get(this) === waiting) this.endWaitingOutput(); // closed meanwhile
      return true;
    }
    this.endWaitingOutput();
    this.budget?.report(this, this.budgetBytes);
    this.deliverHeld();
    this.readOn();
    return true;
  }

  private endWaitingOutput(): void {
    waitingOutputs.delete(this);
    this.flags &= ~OUTPUT_WAITING;
  }

  /** Write one frame (gathered to the end of the task); `counted`: its text is counted already. */
  private write(frame: string | EncodedFrame, counted = false): void {
    const raw = this.raw;
    this.shared.counters.messagesOut++;
    const direct = raw !== undefined && senderIdle(this.socket);
    if (typeof frame === 'string' && !counted) countOutput(frame.length);
    if (raw) {
      this.scheduleFlush();
      // Gathered text is written at the flush in one buffer: the socket need not be corked
      // for it. Any other write is, so that it too waits for the flush.
      if (!direct || typeof frame !== 'string' || 'codec' in this.encoding || this.deflate) {
        this.cork(raw);
      }
    }
    if ('codec' in this.encoding) {
      this.sendBinary(frame, this.encoding.codec, direct);
    } else if (typeof frame === 'string') {
      const deflate = this.deflate;
      if (deflate && Buffer.byteLength(frame) >= deflate.settings.threshold) {
        // ws compresses it (off this thread, in order with what it queues after it).
        this.flushText();
        this.socket.send(frame, this.senderWritten());
      } else if (direct) {
        this.queueText(frame);
      } else {
        this.socket.send(frame, this.senderWritten());
      }
    } else if (direct) {
      this.flushText(); // keep the order of frames
      // One message for many sockets: its whole WebSocket frame is built once per publish
      // and the same buffer is written to each socket, with no copy and no framing per socket.
      const deflate = this.deflate;
      if (deflate && frame.bytes.length >= deflate.settings.threshold && this.sharedDeflate) {
        // Compressed by the first socket that asks, the same compressed frame for the rest.
        raw.write(frame.wire(deflate.frame));
        deflate.counters.framesSent++;
      } else raw.write(frame.wire(textFrame));
    } else {
      this.socket.send(frame.bytes, { binary: false }, this.senderWritten());
    }
    // Coalescing pays off for small frames; large bursts go to the kernel at once, so
    // bufferedAmount keeps meaning "what this peer has not read" to the slow-consumer check.
    // Many small frames go every MAX_GATHERED_FRAMES, for the peer to start on them.
    if (
      this.flags & FLUSH_DUE &&
      ((this.flags += GATHERED_ONE) >= MAX_GATHERED_FRAMES * GATHERED_ONE ||
        this.bufferedAmountCorked() >= MAX_CORKED_BYTES)
    )
      this.flushWrites();
    this.budget?.report(this, this.budgetBytes);
  }

  /** One message in the connection's binary encoding: a fan-out frame is encoded once per publish. */
  private sendBinary(frame: string | EncodedFrame, codec: WireCodec, direct: boolean): void {
    const builders = buildersOf(codec);
    const deflate = this.deflate;
    if (direct && !deflate) {
      const wire =
        typeof frame === 'string'
          ? encoded((text: string) => binaryFrame(textToBinary(codec, text)), frame)
          : frame.wire(builders.frame);
      if (!this.unencodable(wire)) this.raw!.write(wire);
      return;
    }
    const payload =
      typeof frame === 'string'
        ? encoded((text: string) => textToBinary(codec, text), frame)
        : frame.wire(builders.payload);
    if (this.unencodable(payload)) return;
    if (!direct) {
      this.socket.send(payload, { binary: true }, this.senderWritten());
    } else if (payload.length < deflate!.settings.threshold) {
      // With compression: each broadcast compressed once per encoding, the rest by ws. Below
      // the threshold a broadcast's frame is built once per publish, as without deflate.
      const wire = typeof frame === 'string' ? binaryFrame(payload) : frame.wire(builders.frame);
      if (!this.unencodable(wire)) this.raw!.write(wire);
    } else if (typeof frame === 'string') {
      this.socket.send(payload, { binary: true }, this.senderWritten());
    } else if (!this.sharedDeflate) {
      const wire = frame.wire(builders.frame);
      if (!this.unencodable(wire)) this.raw!.write(wire);
    } else {
      // The payload was encoded just above: `encode` does not throw on it.
      this.raw!.write(frame.wire(deflate!.binaryFrame(builders.encode)));
      deflate!.counters.framesSent++;
    }
  }

  /**
   * Whether `built` is a message the codec could not encode (nested too deep for it, or holding a lone
   * surrogate). A call to
   * this peer is answered here, -32603 with `data: { reason }`, as the peer would answer it;
   * anything else (a notification, a subscription's message) is lost to this peer, and its
   * loss told by closing this one connection 1011 with the reason, logged with the session's
   * close.
   */
  private unencodable<T>(built: Encoded<T>): built is UnencodableMessageError {
    if (!(built instanceof UnencodableMessageError)) return false;
    const answers = built.answers;
    if (answers === undefined) this.close(CloseCode.InternalError, built.message);
    else queueMicrotask(() => this.listener?.receive(answers));
    return true;
  }

  /**
   * The callback of a message handed to ws's sender rather than written to the socket: ws may
   * hold it (compressing it, or queued behind one it compresses), and a wait on the socket's
   * buffer learns from this that ws has written it. Only messages ws sends get one: the frames
   * this transport writes itself cost nothing more.
   */
  private senderWritten(): () => void {
    return () => wakeSenderWaits(this);
  }

  /**
   * whenDrained's Upstream: while ws's sender holds messages, wake `wake` once it has written
   * one of them; undefined when it holds none (the bytes are elsewhere, the wait goes on by
   * turns of the event loop).
   */
  private afterSender(wake: () => void): (() => void) | undefined {
    if (!senderHolding(this.socket)) return undefined;
    let waits = senderWaits.get(this);
    if (waits === undefined) senderWaits.set(this, (waits = new Set()));
    waits.add(wake);
    const registered = waits;
    return () => {
      registered.delete(wake);
      if (registered.size === 0 && senderWaits.get(this) === registered) senderWaits.delete(this);
    };
  }

  /** What whenDrained waits on ahead of the socket (made only by a wait, never per connection). */
  private get upstream(): Upstream {
    return (wake) => this.afterSender(wake);
  }

  private bufferedAmountCorked(): number {
    return (this.raw?.writableLength ?? 0) + this.textQueueLength;
  }

  close(code: number = CloseCode.Normal, reason = ''): void {
    const state = this.socket.readyState;
    if (state === this.socket.CLOSING || state === this.socket.CLOSED) return;
    let waited = false;
    if (this.flags & OUTPUT_WAITING) {
      const waiting = waitingOutputs.get(this)!;
      if (waiting.from < waiting.frames.length && !dropsWaitingOutput(code)) {
        // What was sent before the close goes before the close frame, in its output turns;
        // nothing is read meanwhile (nor handled: closeStarted), what was held is dropped.
        if (waiting.close !== undefined) return;
        waiting.close = [code, reason];
        this.stopWaitingToResume();
        this.stopInputPause();
        this.dropHeld();
        this.socket.pause();
        return;
      }
      waited = true; // reading was paused for it
      this.endWaitingOutput();
    }
    this.budget?.leave(this); // what it queued goes within the grace, with the socket
    this.flushText(); // what was sent before the close goes before the close frame
    if (waited || this.cancelResume || this.inputPaused) {
      // Closing: what was held will not be handled, and the peer's close frame must be read.
      this.stopWaitingToResume();
      this.stopInputPause();
      this.dropHeld();
      this.socket.resume();
    }
    try {
      this.socket.close(code, reason);
    } catch {
      // An invalid code or over-long reason must not leave the socket open.
      this.socket.terminate();
      return;
    }
    this.inflateWaiting(); // closing: ws reads on to the peer's close frame
    const timer = setTimeout(() => this.socket.terminate(), this.shared.closeGraceMs);
    timer.unref();
    this.waiting = timer;
  }

  /**
   * Call `listener` once everything queued so far has been written (an empty write's callback),
   * what waits for an output turn included.
   */
  onWritten(listener: () => void): void {
    if (!(this.flags & OUTPUT_WAITING)) return this.onWrittenNow(listener);
    this.waitOutput(() => {
      this.onWrittenNow(listener);
      return true;
    });
  }

  private onWrittenNow(listener: () => void): void {
    this.flushText(); // the gathered frames are queued too
    const raw = this.raw;
    if (!raw || raw.writableEnded || raw.destroyed) return listener();
    raw.write(EMPTY, () => listener());
  }

  /**
   * Call `listener` once the socket's write buffer has emptied (the gathered writes included).
   * Not a bare 'drain': Node emits that only after 16 KiB were queued (see whenDrained).
   */
  onDrain(listener: () => void): () => void {
    // ws keeps its net.Socket private; its write progress is the only sign that bytes went out.
    const raw = this.raw;
    if (!raw) {
      const timer = setTimeout(listener, 0);
      return () => clearTimeout(timer);
    }
    return whenDrained(raw, () => this.bufferedAmount, 0, listener, this.upstream);
  }
}

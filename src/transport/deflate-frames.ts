import { constants, deflateRawSync } from 'node:zlib';

/** The zlib window every compressed broadcast frame is made with (zlib's largest, ws's default). */
export const SHARED_WINDOW_BITS = 15;

/** What a gateway's compression is set to, resolved (see `PerMessageDeflateOptions`). */
export interface DeflateSettings {
  /** Frames smaller than this many bytes go uncompressed. */
  readonly threshold: number;
  /** zlib compression level, 0 to 9. */
  readonly level: number;
  /** zlib memLevel, 1 to 9 (less memory, less compression). */
  readonly memLevel: number;
}

/** Builds a broadcast's whole compressed WebSocket frame from its JSON bytes. */
export type FrameBuilder = (bytes: Uint8Array) => Buffer;

/** Counts kept by `SharedDeflate`, read by the metrics. */
export interface DeflateCounters {
  /** Broadcast messages compressed (once each, however many sockets got them). */
  compressions: number;
  /** Their bytes before and after compression. */
  bytesIn: number;
  bytesOut: number;
  /** Compressed broadcast frames written to sockets. */
  framesSent: number;
}

/** The 4 octets a sync flush ends with, which RFC 7692 (7.2.1) has the sender remove. */
const SYNC_TAIL_LENGTH = 4;

/** FIN + RSV1 (permessage-deflate) + the opcode: text or binary. */
const TEXT = 0xc1;
const BINARY = 0xc2;

/** Write the header of an unmasked, final, compressed (RSV1) frame; returns the offset after it. */
function writeCompressedHeader(buffer: Buffer, length: number, first: number): number {
  buffer[0] = first;
  if (length < 126) {
    buffer[1] = length;
    return 2;
  }
  if (length < 65_536) {
    buffer[1] = 126;
    buffer.writeUInt16BE(length, 2);
    return 4;
  }
  buffer[1] = 127;
  buffer.writeUInt32BE(Math.floor(length / 2 ** 32), 2);
  buffer.writeUInt32BE(length >>> 0, 6);
  return 10;
}

/**
 * Compresses a broadcast once for every socket that negotiated permessage-deflate. The message
 * is deflated on its own (no context taken over from earlier messages: the gateway negotiates
 * `server_no_context_takeover`), so the same bytes are a valid message on every such socket.
 * `frame` is the builder an `EncodedFrame` caches its wire form by: one per gateway, so a
 * broadcast is compressed by the first socket that asks and the result reused by the others.
 */
export class SharedDeflate {
  readonly counters: DeflateCounters = { compressions: 0, bytesIn: 0, bytesOut: 0, framesSent: 0 };

  constructor(readonly settings: DeflateSettings) {}

  /** Per payload builder (one per binary encoding), its compressed-frame builder. */
  private readonly binaryBuilders = new Map<(bytes: Uint8Array) => Uint8Array, FrameBuilder>();

  /** The whole text frame (RSV1 set) carrying `payload` deflated per RFC 7692. */
  readonly frame: FrameBuilder = (payload) => this.compress(payload, TEXT);

  /**
   * The builder of the compressed binary frame of a broadcast whose binary payload `encode`
   * makes from its JSON bytes (MessagePack, CBOR): one per encoding, so a broadcast is
   * compressed once per encoding.
   */
  binaryFrame(encode: (bytes: Uint8Array) => Uint8Array): FrameBuilder {
    let builder = this.binaryBuilders.get(encode);
    if (!builder) {
      builder = (bytes) => this.compress(encode(bytes), BINARY);
      this.binaryBuilders.set(encode, builder);
    }
    return builder;
  }

  private compress(payload: Uint8Array, first: number): Buffer {
    const deflated = deflateRawSync(payload, {
      level: this.settings.level,
      memLevel: this.settings.memLevel,
      windowBits: SHARED_WINDOW_BITS,
      // A sync flush ends the data on a byte boundary with an empty stored block (00 00 ff ff).
      finishFlush: constants.Z_SYNC_FLUSH,
    });
    const length = deflated.length - SYNC_TAIL_LENGTH;
    const frame = Buffer.allocUnsafe(length + (length < 126 ? 2 : length < 65_536 ? 4 : 10));
    deflated.copy(frame, writeCompressedHeader(frame, length, first), 0, length);
    const counters = this.counters;
    counters.compressions++;
    counters.bytesIn += payload.length;
    counters.bytesOut += length;
    return frame;
  }

  /**
   * Whether a socket whose permessage-deflate parameters are `params` can take the shared
   * frames: a client that limited the server's window below the one they are made with cannot.
   */
  accepts(params: { server_max_window_bits?: unknown } | undefined): boolean {
    if (params === undefined) return false;
    const bits = params.server_max_window_bits;
    return typeof bits !== 'number' || bits >= SHARED_WINDOW_BITS;
  }
}

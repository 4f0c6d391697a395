import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { constants, deflateRawSync } from 'node:zlib';
import { WebSocket } from 'ws';
import type { ClientOptions } from 'ws';

/** One server frame as it crossed the wire: whether RSV1 (compressed) was set, and its bytes. */
export interface RawFrame {
  compressed: boolean;
  opcode: number;
  /** The payload as sent (compressed when `compressed`). */
  payload: Buffer;
}

/** Split unmasked server frames out of the bytes received so far. */
function parseFrames(bytes: Buffer): RawFrame[] {
  const frames: RawFrame[] = [];
  let offset = 0;
  while (offset + 2 <= bytes.length) {
    const first = bytes[offset]!;
    let length = bytes[offset + 1]! & 0x7f;
    let start = offset + 2;
    if (length === 126) {
      length = bytes.readUInt16BE(offset + 2);
      start += 2;
    } else if (length === 127) {
      length = Number(bytes.readBigUInt64BE(offset + 2));
      start += 8;
    }
    if (start + length > bytes.length) break;
    frames.push({
      compressed: (first & 0x40) !== 0,
      opcode: first & 0x0f,
      payload: bytes.subarray(start, start + length),
    });
    offset = start + length;
  }
  return frames;
}

/**
 * A `ws` client whose incoming bytes are also recorded as they arrived on the wire, so a test
 * sees which frames were compressed and how many bytes they took.
 */
export async function recordingClient(
  url: string,
  options: ClientOptions = {},
  /** A binary encoding (subprotocol and codec) to speak instead of JSON text. */
  binary?: {
    subprotocol: string;
    encode: (value: unknown) => Uint8Array;
    decode: (bytes: Uint8Array) => unknown;
  },
) {
  const socket = new WebSocket(url, binary ? [binary.subprotocol] : [], options);
  const messages: unknown[] = [];
  const chunks: Buffer[] = [];
  let extensionsHeader: string | undefined;
  socket.on('message', (data: Buffer, isBinary: boolean) =>
    messages.push(isBinary && binary ? binary.decode(data) : JSON.parse(data.toString('utf8'))),
  );
  socket.on('error', () => undefined);
  socket.once('upgrade', (response) => {
    extensionsHeader = response.headers['sec-websocket-extensions'];
    const raw = response.socket;
    raw.prependListener('data', (chunk: Buffer) => chunks.push(chunk));
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  let nextId = 0;
  return {
    socket,
    messages,
    extensionsHeader: () => extensionsHeader,
    /** Every frame received so far, as it was on the wire. */
    wire: (): RawFrame[] => parseFrames(Buffer.concat(chunks)),
    wireBytes: (): number => chunks.reduce((sum, chunk) => sum + chunk.length, 0),
    async call(method: string, params?: unknown): Promise<unknown> {
      const id = ++nextId;
      const message = { jsonrpc: '2.0', method, params, id };
      socket.send(binary ? binary.encode(message) : JSON.stringify(message));
      for (;;) {
        const reply = messages.find((m) => (m as { id?: unknown }).id === id);
        if (reply) return reply;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    },
    async waitForMessages(count: number): Promise<unknown[]> {
      while (messages.length < count) await new Promise((resolve) => setTimeout(resolve, 5));
      return messages;
    },
  };
}

/**
 * A client frame of `opcode` (0x1 text, 0x2 binary, 0x9 ping) carrying `payload`, final, masked
 * with a zero key (the payload goes as it is), and deflated with RSV1 set when `compress` (RFC
 * 7692 7.2.1: without the 00 00 ff ff tail): a MiB of one repeated byte takes about a KiB.
 */
export function clientFrame(payload: Uint8Array, opcode: number, compress: boolean): Buffer {
  const data = compress
    ? deflateRawSync(payload, { finishFlush: constants.Z_SYNC_FLUSH, level: 9 }).subarray(0, -4)
    : Buffer.from(payload);
  return frameWith(data, { opcode, fin: true, compressed: compress });
}

/**
 * A client done by hand over TCP that negotiates permessage-deflate (and `protocol`, when given)
 * and can send any frame, such as a compressed one that inflates far past the gateway's limit.
 */
export async function handmadeDeflateClient(port: number, path = '/rpc', protocol?: string) {
  const socket: Socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  const chunks: Buffer[] = [];
  let waiter: (() => void) | undefined;
  socket.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    waiter?.();
  });
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(
    [
      `GET ${path} HTTP/1.1`,
      `Host: 127.0.0.1:${port}`,
      'Upgrade: websocket',
      'Connection: Upgrade',
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
      'Sec-WebSocket-Version: 13',
      'Sec-WebSocket-Extensions: permessage-deflate; client_no_context_takeover',
      ...(protocol === undefined ? [] : [`Sec-WebSocket-Protocol: ${protocol}`]),
      '',
      '',
    ].join('\r\n'),
  );
  while (!Buffer.concat(chunks).includes('\r\n\r\n')) {
    await new Promise<void>((resolve) => (waiter = resolve));
  }
  const all = Buffer.concat(chunks);
  const headEnd = all.indexOf('\r\n\r\n') + 4;
  const head = all.subarray(0, headEnd).toString('latin1');
  chunks.length = 0;
  if (all.length > headEnd) chunks.push(all.subarray(headEnd));
  return {
    socket,
    head,
    ended,
    /** Send one masked frame (mask 0: the payload goes as it is) with RSV1 set when `compressed`. */
    sendFrame(payload: Buffer, compressed: boolean): void {
      const header = Buffer.alloc(14);
      header[0] = 0x81 | (compressed ? 0x40 : 0);
      header[1] = 0x80 | 127;
      header.writeBigUInt64BE(BigInt(payload.length), 2);
      header.writeUInt32BE(0, 10); // the masking key
      socket.write(Buffer.concat([header, payload]));
    },
    /** The server's frames received so far. */
    frames: (): RawFrame[] => parseFrames(Buffer.concat(chunks)),
  };
}

/**
 * A client frame with its bits as given: `fin`, RSV1 (`compressed`: the payload is taken as
 * compressed, whatever it holds), `opcode` (0 for a continuation); masked with a zero key.
 */
export function frameWith(
  payload: Buffer,
  { opcode, fin, compressed }: { opcode: number; fin: boolean; compressed: boolean },
): Buffer {
  const extended = payload.length < 126 ? 0 : payload.length < 65_536 ? 2 : 8;
  const header = Buffer.alloc(2 + extended + 4);
  header[0] = (fin ? 0x80 : 0) | (compressed ? 0x40 : 0) | opcode;
  if (extended === 0) header[1] = 0x80 | payload.length;
  else if (extended === 2) {
    header[1] = 0x80 | 126;
    header.writeUInt16BE(payload.length, 2);
  } else {
    header[1] = 0x80 | 127;
    header.writeBigUInt64BE(BigInt(payload.length), 2);
  }
  return Buffer.concat([header, payload]);
}

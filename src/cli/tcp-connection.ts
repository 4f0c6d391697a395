import { connect as connectTcp, isIP } from 'node:net';
import type { Socket } from 'node:net';
import { Transform } from 'node:stream';
import { connect as connectTls } from 'node:tls';
import { streamSocket } from '../transport/ndjson-socket.js';
import { CloseCode } from '../transport/transport.js';
import type { WebSocketLike } from '../transport/websocket-transport.js';
import type { ConnectOptions } from './connection.js';
import type { Deadline } from './deadline.js';
import type { Endpoint } from './endpoint.js';
import { ConnectionError } from './errors.js';
import { MAX_MESSAGE_BYTES, mebibytes, notUtf8 } from './limits.js';
import {
  describeNetworkError,
  describeStreamRefusal,
  notAResponse,
  streamRefusalOf,
} from './network-messages.js';
import { PeerConnection, connectWithin } from './peer-connection.js';
import { malformedFrame, parsedOrNot } from './response-shape.js';

/** Longest first line looked at for a refusal (a refusal is a short line). */
const MAX_REFUSAL_LINE = 64 * 1024;

/**
 * Open a TCP (tcp://) or TLS (tls://) socket, turning each way it can fail into a
 * ConnectionError a person can act on. Opened here rather than by `tcpSocket()` so a failed
 * attempt can be cut at once and the raw lines watched for a refusal.
 */
function openSocket(
  endpoint: Endpoint,
  options: ConnectOptions,
  deadline: Deadline,
  signal: AbortSignal | undefined,
): Promise<Socket> {
  const attempt = { endpoint, timeoutMs: deadline.timeoutMs };
  const host = endpoint.host.replace(/^\[|\]$/g, '');
  const port = endpoint.port ?? 0;
  return connectWithin<Socket>(attempt, deadline, signal, ({ opened, failed }) => {
    const socket = endpoint.secure
      ? connectTls({
          host,
          port,
          // SNI carries host names only (RFC 6066): none for an IP address.
          ...(isIP(host) === 0 ? { servername: host } : {}),
          rejectUnauthorized: !options.insecure,
          ...(options.ca === undefined ? {} : { ca: options.ca }),
        })
      : connectTcp({ host, port });
    socket.on('error', (err: Error) =>
      failed(new ConnectionError(describeNetworkError(err, attempt))),
    );
    socket.once(endpoint.secure ? 'secureConnect' : 'connect', () => {
      socket.setNoDelay(true);
      opened(socket);
    });
    return () => socket.destroy();
  });
}

/**
 * A JSON-RPC conversation over newline-delimited JSON on one TCP or TLS connection (the
 * gateway's `listenTcp`), through the project's Peer: bidirectional, so subscriptions work.
 */
/** What the first line from the server said, when it refused the connection. */
interface Refusal {
  error?: ConnectionError;
  /** Whether the server sent anything at all. */
  answered?: boolean;
  /**
   * The first line, whole, when it is no JSON-RPC message (malformedFrame): a `notify` hears
   * nothing else from the server (lines after our own close are not delivered to the Peer).
   */
  malformed?: ConnectionError;
}

/**
 * A refused connection gets one JSON-RPC error line with id null, and then the close. Look at
 * the first line as it arrives, whatever state the socket is in (the Peer would drop it as a
 * response to no call, and lines that come after our own close are not delivered at all).
 * Attached before the NDJSON socket's listener, so it is seen before the close that follows.
 */
function watchForRefusal(raw: Socket, endpoint: Endpoint): Refusal {
  const refusal: Refusal = {};
  const chunks: Buffer[] = [];
  let size = 0;
  const onData = (chunk: Buffer): void => {
    chunks.push(chunk);
    size += chunk.length;
    refusal.answered = true;
    const newline = chunk.indexOf(0x0a);
    if (newline < 0 && size < MAX_REFUSAL_LINE) return;
    raw.off('data', onData);
    const bytes = Buffer.concat(chunks);
    const line = bytes.subarray(0, newline < 0 ? MAX_REFUSAL_LINE : size - chunk.length + newline);
    // Only quoted (escaped for the terminal): a line that is not UTF-8 fails the connection anyway.
    const text = line.toString('utf8');
    const found = streamRefusalOf(text);
    if (found) refusal.error = new ConnectionError(describeStreamRefusal(found, endpoint));
    else if (newline >= 0) {
      const malformed = malformedFrame(parsedOrNot(text));
      if (malformed !== undefined) {
        refusal.malformed = new ConnectionError(notAResponse(endpoint, text, malformed));
      }
    }
  };
  raw.on('data', onData);
  return refusal;
}

/**
 * What `raw` reads, handed on as it comes once checked to be UTF-8 (the NDJSON socket decodes
 * what it gets with U+FFFD in place of bytes that are not: the CLI would print what the server
 * never sent). At the first bytes that are not, nothing more is handed on, `invalid` is told and
 * the stream is destroyed, ending the NDJSON socket without the line it held. Backpressure passes
 * through (the NDJSON socket pauses its input), and destroying either side destroys the other.
 */
function checkedUtf8(raw: Socket, invalid: () => void): Transform {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let bad = false;
  const reject = (): void => {
    bad = true;
    invalid();
    checked.destroy();
  };
  const checked = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      if (bad) return done();
      try {
        decoder.decode(chunk, { stream: true });
      } catch {
        reject();
        return done();
      }
      done(null, chunk);
    },
    flush(done) {
      try {
        decoder.decode(); // a character cut off by the end
      } catch {
        return reject(); // and no end: the line held is not delivered
      }
      done();
    },
  });
  raw.pipe(checked);
  // Cut (by the server or by the CLI) rather than ended: the NDJSON socket closes too.
  raw.once('close', () => {
    if (!checked.writableEnded) checked.destroy();
  });
  // Destroyed by the NDJSON socket (a line past its limit): read no more.
  checked.once('close', () => {
    if (!raw.readableEnded) raw.destroy();
  });
  return checked;
}

/**
 * A JSON-RPC conversation over newline-delimited JSON on one TCP or TLS connection (the
 * gateway's `listenTcp`), through the project's Peer: bidirectional, so subscriptions work.
 */
export class TcpConnection extends PeerConnection {
  private constructor(
    endpoint: Endpoint,
    socket: WebSocketLike,
    private readonly raw: Socket,
    private readonly refusal: Refusal,
  ) {
    super(endpoint, socket);
  }

  /** Connect; `signal` gives up on the attempt (Ctrl+C while connecting). */
  static async open(
    endpoint: Endpoint,
    options: ConnectOptions,
    deadline: Deadline,
    signal?: AbortSignal,
  ): Promise<TcpConnection> {
    const raw = await openSocket(endpoint, options, deadline, signal);
    // Errors after the open end in 'close', which the peer turns into ConnectionClosedError.
    raw.on('error', () => undefined);
    const refusal = watchForRefusal(raw, endpoint);
    // The connection, once made, fails with the reason (the bytes come on later turns).
    const made: { connection?: TcpConnection } = {};
    const input = checkedUtf8(raw, () => {
      const err = new ConnectionError(notUtf8(endpoint.hostPort));
      if (made.connection) made.connection.fail(err);
      else raw.destroy();
    });
    // The same newline-delimited JSON socket `tcpSocket()` gives, over the socket opened here
    // (reading through the UTF-8 check). It opens on the next turn (sending nothing before): the
    // Peer is attached first, so lines that arrived meanwhile reach it.
    const StreamSocket = streamSocket(input, raw, { maxLineBytes: MAX_MESSAGE_BYTES });
    const socket = new StreamSocket('') as WebSocketLike;
    const opened = new Promise<void>((resolve) => (socket.onopen = () => resolve()));
    const connection = new TcpConnection(endpoint, socket, raw, refusal);
    made.connection = connection;
    await opened;
    return connection;
  }

  /**
   * The refusal when the server sent one; otherwise the close. TCP has no close codes: the code
   * is the NDJSON socket's own, 1009 when it dropped a line past MAX_MESSAGE_BYTES.
   */
  protected override describeClosed(code: number | undefined): ConnectionError {
    if (this.refusal.error) return this.refusal.error;
    const where = this.endpoint.hostPort;
    if (code === CloseCode.MessageTooBig) {
      const limit = mebibytes(MAX_MESSAGE_BYTES);
      return new ConnectionError(
        `${where} sent a line longer than ${limit} (the CLI's limit); it was not read`,
      );
    }
    // A TLS server hangs up on a plain client that sent it JSON instead of a handshake.
    const hint =
      this.refusal.answered || this.endpoint.secure
        ? ''
        : ' without a word; if the server takes TLS connections there, use tls://';
    return new ConnectionError(`${where} closed the connection${hint}`);
  }

  /**
   * A notify ends our side and waits for the server to close (PeerConnection.notify): it
   * handles what it was sent before closing, and a server that refused the connection has said
   * so by then.
   */
  protected override failureAfterClose(): ConnectionError | undefined {
    return this.refusal.error ?? super.failureAfterClose() ?? this.refusal.malformed;
  }

  protected cut(): void {
    this.raw.destroy();
  }

  /**
   * End our side (TCP half-close) and wait for the server to close; cut the socket if it takes
   * longer than CLOSE_GRACE_MS or what is left of `deadline`.
   */
  async close(deadline?: Deadline): Promise<void> {
    if (this.raw.closed) return;
    const closed = new Promise<void>((resolve) => this.raw.once('close', () => resolve()));
    this.peer.close(1000, '');
    const timer = setTimeout(() => this.raw.destroy(), this.closeGrace(deadline));
    await closed;
    clearTimeout(timer);
  }
}

import type { IncomingMessage } from 'node:http';
import { WebSocket } from 'ws';
import type { ClientOptions } from 'ws';
import type { WebSocketLike } from '../transport/websocket-transport.js';
import type { ConnectOptions } from './connection.js';
import type { Deadline } from './deadline.js';
import type { Endpoint } from './endpoint.js';
import { ConnectionError } from './errors.js';
import { MAX_MESSAGE_BYTES, mebibytes, notUtf8 } from './limits.js';
import { MAX_REFUSAL_BODY, REFUSAL_BODY_MS, readBody } from './read-body.js';
import { describeHttpStatus, describeNetworkError } from './network-messages.js';
import { PeerConnection, connectWithin } from './peer-connection.js';

/** Offered first when the user offers subprotocols, so the gateway answers with it and never echoes a token. */
const PREFERRED_SUBPROTOCOL = 'jsonrpc-2.0';

function offeredProtocols(options: ConnectOptions): string[] {
  if (options.protocols.length === 0) return [];
  if (options.protocols.includes(PREFERRED_SUBPROTOCOL)) return [...options.protocols];
  return [PREFERRED_SUBPROTOCOL, ...options.protocols];
}

/** Open a `ws` WebSocket, turning each way it can fail into a ConnectionError a person can act on. */
function openSocket(
  endpoint: Endpoint,
  options: ConnectOptions,
  deadline: Deadline,
  signal: AbortSignal | undefined,
): Promise<WebSocket> {
  const attempt = { endpoint, timeoutMs: deadline.timeoutMs };
  const wsOptions: ClientOptions = {
    headers: { ...options.headers },
    rejectUnauthorized: !options.insecure,
    perMessageDeflate: false,
    followRedirects: false,
    maxPayload: MAX_MESSAGE_BYTES,
  };
  if (options.ca !== undefined) wsOptions.ca = options.ca;
  const handshakeTimeout = deadline.remaining();
  if (handshakeTimeout !== undefined) wsOptions.handshakeTimeout = handshakeTimeout;
  return connectWithin<WebSocket>(attempt, deadline, signal, ({ opened, failed }) => {
    const socket = new WebSocket(endpoint.url.href, offeredProtocols(options), wsOptions);
    socket.on('error', (err) => failed(new ConnectionError(describeNetworkError(err, attempt))));
    socket.on('unexpected-response', (_request, response: IncomingMessage) => {
      const refused = (body: string): void => {
        const answer = { status: response.statusCode ?? 0, body, headers: response.headers };
        failed(new ConnectionError(describeHttpStatus(answer, endpoint)));
      };
      readBody(response, MAX_REFUSAL_BODY, REFUSAL_BODY_MS).then(
        ({ bytes }) => refused(bytes.toString('utf8')),
        () => refused(''),
      );
    });
    socket.once('open', () => opened(socket));
    return () => socket.terminate(); // emits one more 'error', ignored by then
  });
}

/** A JSON-RPC conversation over one WebSocket, through the project's Peer. */
export class WsConnection extends PeerConnection {
  private constructor(
    endpoint: Endpoint,
    private readonly ws: WebSocket,
  ) {
    super(endpoint, ws as unknown as WebSocketLike);
    // A frame ws refused (a WS_ERR_ code): ws closes with its own code (1009, 1007, 1002), and
    // the close that follows would say 1006, or whatever the server answers; say why instead.
    // Other errors after the open end in 'close', which the peer turns into ConnectionClosedError.
    ws.on('error', (err: Error & { code?: string }) => {
      const where = endpoint.hostPort;
      if (err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') {
        const limit = mebibytes(MAX_MESSAGE_BYTES);
        this.fail(
          new ConnectionError(
            `${where} sent a message larger than ${limit} (the CLI's limit); it was not read`,
          ),
        );
      } else if (err.code === 'WS_ERR_INVALID_UTF8') {
        this.fail(new ConnectionError(notUtf8(where)));
      } else if (err.code?.startsWith('WS_ERR_')) {
        this.fail(
          new ConnectionError(
            `${where} broke the WebSocket protocol (${err.message}); the CLI closed the connection`,
          ),
        );
      }
    });
  }

  /** Connect; `signal` gives up on the attempt (Ctrl+C while connecting). */
  static async open(
    endpoint: Endpoint,
    options: ConnectOptions,
    deadline: Deadline,
    signal?: AbortSignal,
  ): Promise<WsConnection> {
    const socket = await openSocket(endpoint, options, deadline, signal);
    return new WsConnection(endpoint, socket);
  }

  protected cut(): void {
    this.ws.terminate();
  }

  /**
   * Close with 1000 and wait for the close handshake; cut the socket if it takes longer than
   * CLOSE_GRACE_MS or what is left of `deadline`.
   */
  async close(deadline?: Deadline): Promise<void> {
    if (this.ws.readyState === WebSocket.CLOSED) return;
    const closed = new Promise<void>((resolve) => this.ws.once('close', () => resolve()));
    this.peer.close(1000, '');
    const timer = setTimeout(() => this.ws.terminate(), this.closeGrace(deadline));
    await closed;
    clearTimeout(timer);
  }
}

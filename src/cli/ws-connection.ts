import type { IncomingMessage } from 'node:http';
import { WebSocket } from 'ws';
import type { ClientOptions } from 'ws';
import type { Observable } from 'rxjs';
import { Peer } from '../peer/peer.js';
import type { IncomingNotification } from '../peer/peer.js';
import { JsonRpcError } from '../protocol/errors.js';
import { ConnectionClosedError, TimeoutError } from '../protocol/local-errors.js';
import type { Params } from '../protocol/types.js';
import { WebSocketTransport } from '../transport/websocket-transport.js';
import type { WebSocketLike } from '../transport/websocket-transport.js';
import type { ConnectOptions, RpcConnection } from './connection.js';
import type { Deadline } from './deadline.js';
import type { Endpoint } from './endpoint.js';
import { ConnectionError } from './errors.js';
import { readBody } from './read-body.js';
import {
  describeClose,
  describeHttpStatus,
  describeNetworkError,
  timeoutMessage,
} from './network-messages.js';

/** Offered first when the user offers subprotocols, so the gateway answers with it and never echoes a token. */
const PREFERRED_SUBPROTOCOL = 'jsonrpc-2.0';
/** How long a close handshake may take before the socket is cut. */
const CLOSE_GRACE_MS = 2_000;

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
  };
  if (options.ca !== undefined) wsOptions.ca = options.ca;
  const handshakeTimeout = deadline.remaining();
  if (handshakeTimeout !== undefined) wsOptions.handshakeTimeout = handshakeTimeout;
  return new Promise((resolve, reject) => {
    let settled = false;
    const socket = new WebSocket(endpoint.url.href, offeredProtocols(options), wsOptions);
    const remaining = deadline.remaining();
    const timer =
      remaining === undefined
        ? undefined
        : setTimeout(() => fail(new ConnectionError(timeoutMessage(attempt))), remaining);
    const onAbort = (): void => fail(new ConnectionError('stopped while connecting'));
    signal?.addEventListener('abort', onAbort);
    function fail(err: ConnectionError): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      reject(err);
      socket.terminate(); // emits one more 'error', ignored below
    }
    if (signal?.aborted) onAbort();
    socket.on('error', (err) => fail(new ConnectionError(describeNetworkError(err, attempt))));
    socket.on('unexpected-response', (_request, response: IncomingMessage) => {
      const refused = (body: string): void => {
        const answer = { status: response.statusCode ?? 0, body, headers: response.headers };
        fail(new ConnectionError(describeHttpStatus(answer, endpoint)));
      };
      readBody(response, 4096).then(refused, () => refused(''));
    });
    socket.once('open', () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve(socket);
    });
  });
}

/** A JSON-RPC conversation over one WebSocket, through the project's Peer. */
export class WsConnection implements RpcConnection {
  private constructor(
    readonly endpoint: Endpoint,
    private readonly socket: WebSocket,
    private readonly peer: Peer<undefined>,
  ) {}

  /** Connect; `signal` gives up on the attempt (Ctrl+C while connecting). */
  static async open(
    endpoint: Endpoint,
    options: ConnectOptions,
    deadline: Deadline,
    signal?: AbortSignal,
  ): Promise<WsConnection> {
    const socket = await openSocket(endpoint, options, deadline, signal);
    // Errors after the open end in 'close', which the peer turns into ConnectionClosedError.
    socket.on('error', () => undefined);
    // No handlers: the peer answers the server's own calls with -32601 by itself.
    const peer = new Peer<undefined>(new WebSocketTransport(socket as unknown as WebSocketLike), {
      session: undefined,
    });
    return new WsConnection(endpoint, socket, peer);
  }

  /** Every notification from the server; completes when the connection closes. */
  get notifications$(): Observable<IncomingNotification> {
    return this.peer.notifications$;
  }

  /** Settles when the connection has closed, whoever closed it. */
  get closed(): Promise<{ code: number; reason: string }> {
    return this.peer.closed;
  }

  /** A ConnectionError telling how the connection closed. */
  closedError(code: number | undefined, reason: string | undefined): ConnectionError {
    return new ConnectionError(describeClose(code, reason, this.endpoint));
  }

  async call(method: string, params: Params | undefined, deadline: Deadline): Promise<unknown> {
    try {
      return await this.peer.call(method, params, { timeout: deadline.remaining() ?? 0 });
    } catch (err) {
      throw this.translate(err, deadline);
    }
  }

  async notify(method: string, params: Params | undefined, deadline: Deadline): Promise<void> {
    try {
      this.peer.notify(method, params);
    } catch (err) {
      throw this.translate(err, deadline);
    }
    await this.flushed(deadline);
  }

  /** Close with 1000 and wait for the close handshake (cut the socket if it takes too long). */
  async close(): Promise<void> {
    if (this.socket.readyState === WebSocket.CLOSED) return;
    const closed = new Promise<void>((resolve) => this.socket.once('close', () => resolve()));
    this.peer.close(1000, '');
    const timer = setTimeout(() => this.socket.terminate(), CLOSE_GRACE_MS);
    await closed;
    clearTimeout(timer);
  }

  /** Resolves once every queued frame has been handed to the network (the transport uncorks at the end of the turn). */
  private async flushed(deadline: Deadline): Promise<void> {
    const limit = Date.now() + (deadline.remaining() ?? CLOSE_GRACE_MS);
    await new Promise((resolve) => setImmediate(resolve));
    while (
      this.socket.readyState === WebSocket.OPEN &&
      this.socket.bufferedAmount > 0 &&
      Date.now() < limit
    ) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    if (this.socket.readyState !== WebSocket.OPEN) {
      const info = await this.peer.closed;
      throw this.closedError(info.code, info.reason);
    }
  }

  private translate(err: unknown, deadline: Deadline): unknown {
    if (err instanceof JsonRpcError) return err;
    if (err instanceof TimeoutError) {
      const attempt = { endpoint: this.endpoint, timeoutMs: deadline.timeoutMs };
      return new ConnectionError(timeoutMessage(attempt, `answer to "${err.method}"`));
    }
    if (err instanceof ConnectionClosedError)
      return this.closedError(err.closeCode, err.closeReason);
    return err;
  }
}

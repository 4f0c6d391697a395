import type { Observable } from 'rxjs';
import { Peer } from '../peer/peer.js';
import type { IncomingNotification } from '../peer/peer.js';
import { JsonRpcError } from '../protocol/errors.js';
import { ConnectionClosedError, TimeoutError } from '../protocol/local-errors.js';
import type { Params } from '../protocol/types.js';
import { WebSocketTransport } from '../transport/websocket-transport.js';
import type { WebSocketLike } from '../transport/websocket-transport.js';
import type { RpcConnection } from './connection.js';
import type { Deadline } from './deadline.js';
import type { Endpoint } from './endpoint.js';
import { ConnectionError } from './errors.js';
import { GuardedTransport } from './guarded-transport.js';
import type { FrameMeter } from './guarded-transport.js';
import { nestedTooDeep } from './limits.js';
import type { Attempt } from './network-messages.js';
import { describeClose, notAResponse, timeoutMessage } from './network-messages.js';

/** How long a close (handshake or TCP half-close) may take before the socket is cut. */
export const CLOSE_GRACE_MS = 2_000;

const OPEN = 1;

/** What a connection attempt reports: the open socket, or why it failed. */
export interface Settle<T> {
  opened: (value: T) => void;
  failed: (err: ConnectionError) => void;
}

/**
 * Run one connection attempt within the --timeout budget: `start` opens the socket, reports
 * through `settle`, and returns a function that cuts the socket when the attempt fails
 * (timeout, `signal` aborted by Ctrl+C, or an error).
 */
export function connectWithin<T>(
  attempt: Attempt,
  deadline: Deadline,
  signal: AbortSignal | undefined,
  start: (settle: Settle<T>) => () => void,
): Promise<T> {
  return new Promise((resolve, reject) => {
    let settled = false;
    let cut: (() => void) | undefined;
    let cutWhenStarted = false;
    const remaining = deadline.remaining();
    const timer =
      remaining === undefined
        ? undefined
        : setTimeout(() => failed(new ConnectionError(timeoutMessage(attempt))), remaining);
    const onAbort = (): void => failed(new ConnectionError('stopped while connecting'));
    const done = (): void => {
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    function failed(err: ConnectionError): void {
      if (settled) return;
      done();
      reject(err);
      if (cut) cut();
      else cutWhenStarted = true;
    }
    function opened(value: T): void {
      if (settled) return;
      done();
      resolve(value);
    }
    signal?.addEventListener('abort', onAbort);
    if (signal?.aborted) return onAbort();
    try {
      cut = start({ opened, failed });
    } catch (err) {
      done();
      reject(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    if (cutWhenStarted) cut();
  });
}

/**
 * A JSON-RPC conversation over one bidirectional socket (a WebSocket, or newline-delimited
 * JSON over TCP or TLS) through the project's Peer: what `call`, `notify`, `discover` and
 * `subscribe` need, whatever carries it.
 */
export abstract class PeerConnection implements RpcConnection {
  protected readonly peer: Peer<undefined>;
  private readonly transport: GuardedTransport;
  /** Why the CLI cut the connection (the server passed one of its limits), when it did. */
  private failure: ConnectionError | undefined;

  protected constructor(
    readonly endpoint: Endpoint,
    /** The open socket, WebSocket-shaped (`readyState`, `bufferedAmount`). */
    protected readonly socket: WebSocketLike,
  ) {
    this.transport = new GuardedTransport(new WebSocketTransport(socket), {
      tooDeep: () => this.fail(new ConnectionError(nestedTooDeep(endpoint.hostPort))),
      malformed: (reason, text) =>
        this.fail(new ConnectionError(notAResponse(endpoint, text, reason))),
    });
    // No handlers: the peer answers the server's own calls with -32601 by itself.
    this.peer = new Peer<undefined>(this.transport, { session: undefined });
  }

  /** The frame being handled (for what a notification's text weighs). */
  get frame(): FrameMeter {
    return this.transport;
  }

  /** Every notification from the server; completes when the connection closes. */
  get notifications$(): Observable<IncomingNotification> {
    return this.peer.notifications$;
  }

  /** Settles when the connection has closed, whoever closed it. */
  get closed(): Promise<{ code: number; reason: string }> {
    return this.peer.closed;
  }

  /** A ConnectionError telling how the connection closed: why the CLI cut it, when it did. */
  closedError(code: number | undefined, reason: string | undefined): ConnectionError {
    return this.failure ?? this.describeClosed(code, reason);
  }

  protected describeClosed(code: number | undefined, reason: string | undefined): ConnectionError {
    return new ConnectionError(describeClose(code, reason, this.endpoint));
  }

  /**
   * The server passed one of the CLI's limits: cut the connection at once (a server that means
   * harm would not answer a close), and fail what waits on it with `err`.
   */
  protected fail(err: ConnectionError): void {
    this.failure ??= err;
    this.cut();
  }

  /** Drop the connection without a close handshake. */
  protected abstract cut(): void;

  async call(method: string, params: Params | undefined, deadline: Deadline): Promise<unknown> {
    try {
      return await this.peer.call(method, params, { timeoutMs: deadline.remaining() ?? 0 });
    } catch (err) {
      throw this.translate(err, deadline);
    }
  }

  /**
   * Send, make sure it left, then close and wait for the server's side of the close. A
   * notification has no answer, so what the server sends meanwhile is all a notify hears of it:
   * a frame no JSON-RPC peer sends (the CLI cut the connection for it) is told as a call's
   * answer would be.
   */
  async notify(method: string, params: Params | undefined, deadline: Deadline): Promise<void> {
    try {
      this.peer.notify(method, params);
    } catch (err) {
      throw this.translate(err, deadline);
    }
    await this.flushed(deadline);
    await this.close(deadline);
    const failure = this.failureAfterClose();
    if (failure) throw failure;
  }

  /** What a notify reports once the connection has closed: why the CLI cut it, if it did. */
  protected failureAfterClose(): ConnectionError | undefined {
    return this.failure;
  }

  abstract close(deadline?: Deadline): Promise<void>;

  /** How long a close waits for the server: CLOSE_GRACE_MS, within what is left of `deadline`. */
  protected closeGrace(deadline: Deadline | undefined): number {
    return deadline?.within(CLOSE_GRACE_MS) ?? CLOSE_GRACE_MS;
  }

  /** Resolves once every queued message has been handed to the network (the transport uncorks at the end of the turn). */
  protected async flushed(deadline: Deadline): Promise<void> {
    const limit = Date.now() + (deadline.remaining() ?? CLOSE_GRACE_MS);
    await new Promise((resolve) => setImmediate(resolve));
    while (
      this.socket.readyState === OPEN &&
      this.socket.bufferedAmount > 0 &&
      Date.now() < limit
    ) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    if (this.socket.readyState !== OPEN) {
      const info = await this.peer.closed;
      throw this.closedError(info.code, info.reason);
    }
  }

  protected translate(err: unknown, deadline: Deadline): unknown {
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

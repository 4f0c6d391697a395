import type { Params } from '../protocol/types.js';
import type { Deadline } from './deadline.js';

/** TLS and HTTP settings from the command line, for either transport. */
export interface ConnectOptions {
  /** Extra request headers (-H), by lower-case name; none over tcp:// and tls://. */
  readonly headers: Readonly<Record<string, string>>;
  /** Subprotocols to offer (--protocol); WebSocket only. */
  readonly protocols: readonly string[];
  /** Skip certificate verification (-k). */
  readonly insecure: boolean;
  /** PEM text of the certificate(s) to trust (--cacert). */
  readonly ca: string | undefined;
}

/**
 * One conversation with the server, over WebSocket, HTTP, or NDJSON over TCP. `call` rejects with a
 * JsonRpcError when the server answers with an error, and with a ConnectionError
 * when it cannot be reached or talked to.
 */
export interface RpcConnection {
  call(method: string, params: Params | undefined, deadline: Deadline): Promise<unknown>;
  /**
   * Resolves once the notification was accepted (HTTP), or has left and the server's side of the
   * close came, or was waited for (WebSocket, TCP).
   */
  notify(method: string, params: Params | undefined, deadline: Deadline): Promise<void>;
  /**
   * Close, waiting for the server's side of the close at most within `deadline` (what is left of
   * the --timeout budget), then cutting the connection.
   */
  close(deadline?: Deadline): Promise<void>;
}

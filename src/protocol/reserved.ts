/** Method names starting with this prefix belong to the gateway itself (spec 4). */
export const RESERVED_PREFIX = 'rpc.';

/** Names of the gateway's own methods and notifications in the reserved space. */
export const ReservedMethod = {
  /** Notification: `{ id }` of a request the sender no longer wants answered. */
  Cancel: 'rpc.cancel',
  /** Request: liveness probe a browser client can send (it cannot send WebSocket pings). */
  Ping: 'rpc.ping',
  /** Notification from server: reconnect elsewhere, the server is draining. */
  Reconnect: 'rpc.reconnect',
  /** Request: the service's OpenRPC document (when it was defined as a contract). */
  Discover: 'rpc.discover',
  /**
   * Request, client to server: `{ token }`. Authenticates an in-band connection (its first
   * message) or refreshes the identity of an authenticated one. Result `{ sessionId, user?, expiresAt? }`.
   */
  Authenticate: 'rpc.authenticate',
  /** Request, server to client: `{ expiresAt }`; the server asks for a fresh token. Result `{ token }`. */
  Token: 'rpc.token',
  /**
   * Notification from server: `{ topic, subscription, seq? }`. The server subscribed the session
   * to `topic` itself (session.join); the subscription's frames follow under that id, as for
   * one the client made (`seq`: it starts after that message).
   */
  Joined: 'rpc.joined',
} as const;

export function isReservedMethod(method: string): boolean {
  return method.startsWith(RESERVED_PREFIX);
}

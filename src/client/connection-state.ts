/**
 * - `connecting`: the first connection attempt is under way;
 * - `open`: calls go straight to the server;
 * - `reconnecting`: the connection was lost and a new one is being made (calls queue or reject);
 * - `closed`: `close()` was called, or the client stopped (credentials refused, reconnecting off,
 *   `reconnect.maxAttempts` failed reconnects in a row); nothing more will happen.
 */
export type ConnectionState = 'connecting' | 'open' | 'reconnecting' | 'closed';

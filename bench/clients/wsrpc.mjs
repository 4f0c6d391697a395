// The load generator's client that is this project's own: createClient from the built
// `wsrpc-gateway/client` on Node with `ws` (reconnection off: a dropped connection is a failure
// of the slice, not something to ride out). Each call is `client.call(method, [a, b])`; the
// client frames, corks and matches the replies itself, so what it costs is in the figures.
import WebSocket from 'ws';
import { createClient } from 'wsrpc-gateway/client';

class WsrpcConnection {
  constructor(client, method) {
    this.client = client;
    this.method = method;
    /** (id, result, error) for each reply to call(). */
    this.onReply = () => undefined;
  }

  call(id, a, b) {
    this.client.call(this.method, [a, b]).then(
      (result) => this.onReply(id, result, undefined),
      (err) => this.onReply(id, undefined, { code: err.code, message: err.message }),
    );
  }

  subscribe() {
    return Promise.reject(new Error('the upstream scenarios do not subscribe'));
  }

  close() {
    return this.client.close();
  }
}

export async function open(url, { method }) {
  const client = createClient({ url, WebSocket, reconnect: false });
  try {
    await client.opened();
  } catch (err) {
    await client.close();
    throw err;
  }
  return new WsrpcConnection(client, method);
}

// The load generator's client that is this project's own: createClient from the built
// `wsrpc-gateway/client` on Node with `ws` (reconnection off: a dropped connection is a failure
// of the slice, not something to ride out). Each call is `client.call(method, [a, b])`; a
// subscriber is `client.subscribe(topic)` observed; the client frames, corks, parses and matches
// the replies and messages itself, so what it costs is in the figures.
import WebSocket from 'ws';
import { createClient } from 'wsrpc-gateway/client';

class WsrpcConnection {
  constructor(client, { method = 'sum', topic = 'bench' }) {
    this.client = client;
    this.method = method;
    this.topic = topic;
    /** (id, result, error) for each reply to call(). */
    this.onReply = () => undefined;
    /** (k) for each fan-out message: k is the payload's counter. */
    this.onData = () => undefined;
    this.subscription = undefined;
    /** The subscription's error (a refused subscribe), kept for the slice's report. */
    this.failure = undefined;
  }

  call(id, a, b) {
    this.client.call(this.method, [a, b]).then(
      (result) => this.onReply(id, result, undefined),
      (err) => this.onReply(id, undefined, { code: err.code, message: err.message }),
    );
  }

  /**
   * Observe `client.subscribe(topic)`. The client tells no one when the server has accepted a
   * subscribe, so this resolves once it is sent: the runner then waits for the server to count
   * every subscriber (`awaitSubscribers`) before it publishes.
   */
  subscribe() {
    if (this.subscription) return Promise.reject(new Error('already subscribed'));
    this.subscription = this.client.subscribe(this.topic).subscribe({
      next: (data) => this.onData(data.k),
      error: (err) => (this.failure = err),
    });
    return Promise.resolve(this.topic);
  }

  unsubscribe() {
    this.subscription?.unsubscribe();
    this.subscription = undefined;
    return Promise.resolve(true);
  }

  close() {
    // Closing ends the subscription with the connection: no unsubscribe frame.
    this.subscription = undefined;
    return this.client.close();
  }
}

export async function open(url, options) {
  const client = createClient({ url, WebSocket, reconnect: false });
  try {
    await client.opened();
  } catch (err) {
    await client.close();
    throw err;
  }
  return new WsrpcConnection(client, options);
}

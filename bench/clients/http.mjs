// The load generator's client for a JSON-RPC 2.0 over HTTP upstream called directly: an undici
// keep-alive Pool, the client library and pool settings the gateway's upstream client uses
// (`client.connections` sockets, one request at a time on each), request bodies written as
// template strings, replies read whole and JSON.parse'd. One "connection" here is one Pool.
import { Pool } from 'undici';

class HttpConnection {
  constructor(url, { method, connections }) {
    const target = new URL(url);
    this.pool = new Pool(target.origin, { connections, pipelining: 1 });
    this.path = `${target.pathname}${target.search}`;
    this.method = method;
    /** (id, result, error) for each reply to call(). */
    this.onReply = () => undefined;
  }

  /** POST orders.sum([a, b]) with this id (each request is its own write: nothing to coalesce). */
  call(id, a, b) {
    const body = `{"jsonrpc":"2.0","method":"${this.method}","params":[${a},${b}],"id":${id}}`;
    this.pool
      .request({
        method: 'POST',
        path: this.path,
        headers: { 'content-type': 'application/json' },
        body,
      })
      .then((response) => response.body.text())
      .then(
        (text) => {
          const msg = JSON.parse(text);
          this.onReply(msg.id, msg.result, msg.error);
        },
        (err) => this.onReply(id, undefined, { message: String(err) }),
      );
  }

  subscribe() {
    return Promise.reject(new Error('an HTTP upstream has no subscriptions'));
  }

  close() {
    return this.pool.close();
  }
}

export function open(url, client) {
  return Promise.resolve(new HttpConnection(url, client));
}

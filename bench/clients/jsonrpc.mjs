// The load generator's client for every contestant that speaks JSON-RPC 2.0 on the wire:
// a raw `ws` socket, request frames written as template strings, replies JSON.parse'd.
// Fan-out frames are recognized (and their payload counter read) without parsing them.
import WebSocket from 'ws';
import { sendCoalesced } from '../cork.mjs';

const SUBSCRIBE_ID = -1;
const UNSUBSCRIBE_ID = -2;

/** Read the non-negative integer that starts at `pos` in `text`. */
function readInt(text, pos) {
  let n = 0;
  for (let c = text.charCodeAt(pos); c >= 48 && c <= 57; c = text.charCodeAt(++pos))
    n = n * 10 + c - 48;
  return n;
}

class JsonRpcConnection {
  constructor(ws, { subscribe, method = 'sum' }) {
    this.ws = ws;
    this.subscribeRequest = subscribe;
    this.method = method;
    /** (id, result, error) for each reply to call(). */
    this.onReply = () => undefined;
    /** (k) for each fan-out message: k is the payload's counter. */
    this.onData = () => undefined;
    this.subscribed = undefined;
    ws.on('message', (data) => this.receive(data.toString()));
  }

  receive(text) {
    // Every contestant's fan-out frame carries the payload {"k":N,...}; no reply has a "k" key.
    const at = text.indexOf('"k":');
    if (at !== -1) return this.onData(readInt(text, at + 4));
    const msg = JSON.parse(text);
    if (msg.id === SUBSCRIBE_ID) return this.subscribed?.(msg);
    if (msg.id === UNSUBSCRIBE_ID) return this.unsubscribed?.(msg);
    this.onReply(msg.id, msg.result, msg.error);
  }

  /** Send sum([a, b]) (or `client.method`) with this id; with `coalesce`, frames written in one turn leave together. */
  call(id, a, b, coalesce) {
    const frame = `{"jsonrpc":"2.0","method":"${this.method}","params":[${a},${b}],"id":${id}}`;
    if (coalesce) sendCoalesced(this.ws, frame);
    else this.ws.send(frame);
  }

  /** Subscribe to the "bench" topic; resolves with the subscription id once the server accepted. */
  subscribe() {
    const { method, params } = this.subscribeRequest;
    return new Promise((resolve, reject) => {
      this.subscribed = (msg) =>
        msg.error ? reject(new Error(JSON.stringify(msg.error))) : resolve(msg.result);
      this.ws.send(JSON.stringify({ jsonrpc: '2.0', method, params, id: SUBSCRIBE_ID }));
    });
  }

  /** End the subscription `id` (`unsubscribe [id]`); resolves with the server's answer (true). */
  unsubscribe(id) {
    return new Promise((resolve, reject) => {
      this.unsubscribed = (msg) =>
        msg.error ? reject(new Error(JSON.stringify(msg.error))) : resolve(msg.result);
      this.ws.send(
        JSON.stringify({ jsonrpc: '2.0', method: 'unsubscribe', params: [id], id: UNSUBSCRIBE_ID }),
      );
    });
  }

  close() {
    if (this.ws.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => {
      this.ws.once('close', resolve);
      this.ws.close();
    });
  }
}

/** Connect; `localAddress` picks the loopback source address (the kernel's choice without it). */
export function open(url, client, { localAddress } = {}) {
  return new Promise((resolve, reject) => {
    // `client.deflate`: offer permessage-deflate (the compression scenario).
    const ws = new WebSocket(url, { perMessageDeflate: client.deflate === true, localAddress });
    ws.once('open', () => resolve(new JsonRpcConnection(ws, client)));
    ws.once('error', reject);
  });
}

// The load generator's client for every contestant that speaks JSON-RPC 2.0 on the wire:
// a raw `ws` socket, request frames written as template strings, replies JSON.parse'd.
// Fan-out frames are recognized (and their payload counter read) without parsing them, unless
// `client.parseEvery` asks that every frame be JSON.parse'd, as an application would.
import WebSocket from 'ws';
import { Packr, Unpackr } from 'msgpackr';
import { sendCoalesced } from '../cork.mjs';

// `client.encoding: 'msgpack'` (gateway-msgpack): every frame MessagePack, both ways.
const packr = new Packr({ useRecords: false });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true });

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
  constructor(ws, { subscribe, method = 'sum', encoding, parseEvery = false }) {
    this.ws = ws;
    this.msgpack = encoding === 'msgpack';
    this.parseEvery = parseEvery;
    this.subscribeRequest = subscribe;
    this.method = method;
    /** (id, result, error) for each reply to call(). */
    this.onReply = () => undefined;
    /** (k) for each fan-out message: k is the payload's counter. */
    this.onData = () => undefined;
    this.subscribed = undefined;
    ws.on('message', (data, binary) =>
      binary ? this.receiveValue(unpackr.unpack(data)) : this.receive(data.toString()),
    );
  }

  /**
   * A decoded message (MessagePack, or JSON with parseEvery): a fan-out frame
   * ({ method, params: { result: { k } } }) or a reply.
   */
  receiveValue(msg) {
    const k = msg.params?.result?.k;
    if (k !== undefined) return this.onData(k);
    if (msg.id === SUBSCRIBE_ID) return this.subscribed?.(msg);
    if (msg.id === UNSUBSCRIBE_ID) return this.unsubscribed?.(msg);
    this.onReply(msg.id, msg.result, msg.error);
  }

  /** A message as this connection's frames carry it. */
  encode(message) {
    return this.msgpack ? packr.pack(message) : JSON.stringify(message);
  }

  receive(text) {
    if (this.parseEvery) return this.receiveValue(JSON.parse(text));
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
    const frame = this.msgpack
      ? packr.pack({ jsonrpc: '2.0', method: this.method, params: [a, b], id })
      : `{"jsonrpc":"2.0","method":"${this.method}","params":[${a},${b}],"id":${id}}`;
    if (coalesce) sendCoalesced(this.ws, frame);
    else this.ws.send(frame);
  }

  /** Subscribe to the "bench" topic; resolves with the subscription id once the server accepted. */
  subscribe() {
    const { method, params } = this.subscribeRequest;
    return new Promise((resolve, reject) => {
      this.subscribed = (msg) =>
        msg.error ? reject(new Error(JSON.stringify(msg.error))) : resolve(msg.result);
      this.ws.send(this.encode({ jsonrpc: '2.0', method, params, id: SUBSCRIBE_ID }));
    });
  }

  /** End the subscription `id` (`unsubscribe [id]`); resolves with the server's answer (true). */
  unsubscribe(id) {
    return new Promise((resolve, reject) => {
      this.unsubscribed = (msg) =>
        msg.error ? reject(new Error(JSON.stringify(msg.error))) : resolve(msg.result);
      this.ws.send(
        this.encode({ jsonrpc: '2.0', method: 'unsubscribe', params: [id], id: UNSUBSCRIBE_ID }),
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
    const protocols = client.encoding === 'msgpack' ? ['jsonrpc-2.0+msgpack'] : [];
    const ws = new WebSocket(url, protocols, {
      perMessageDeflate: client.deflate === true,
      localAddress,
    });
    ws.once('open', () => resolve(new JsonRpcConnection(ws, client)));
    ws.once('error', reject);
  });
}

// A stand-in for a client's WebSocket, for measuring a client's own work without a socket
// (bench/client-cost.mjs, bench/instructions.mjs): it answers a `sum` call and a subscribe as
// a server would, and hands the client frames (`deliver`) as a socket does.

/** The part of a WebSocket the client uses, answering as a server would, without a socket. */
export class StandInSocket {
  static last;
  constructor() {
    this.readyState = 0;
    this.bufferedAmount = 0;
    this.protocol = '';
    this.binaryType = 'blob';
    this.onopen = this.onmessage = this.onclose = this.onerror = null;
    /** The raw client's receiver (it has no onmessage). */
    this.listener = undefined;
    this.replies = [];
    this.scheduled = false;
    StandInSocket.last = this;
    setTimeout(() => {
      this.readyState = 1;
      this.onopen?.({});
    }, 0);
  }

  send(data) {
    // The id is the last member; a `sum` is answered params[0] + params[1] (here + 1).
    const id = data.slice(data.lastIndexOf('"id":') + 5, data.length - 1);
    if (data.includes('"method":"subscribe"')) {
      this.reply(`{"jsonrpc":"2.0","result":"0x1","id":${id}}`);
      return;
    }
    const from = data.indexOf('"params":[') + 10;
    const a = Number(data.slice(from, data.indexOf(',', from)));
    this.reply(`{"jsonrpc":"2.0","result":${a + 1},"id":${id}}`);
  }

  reply(text) {
    this.replies.push(text);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const due = this.replies;
      this.replies = [];
      for (const data of due) this.deliver(data);
    });
  }

  deliver(data) {
    // A socket hands over a flat string, read from the frame's bytes; one built here by
    // concatenation is a rope, which whatever reads it first (a regex, JSON.parse) must flatten
    // first. Flattened here (ToNumber reads it whole), for every variant alike.
    Number(data);
    if (this.onmessage) this.onmessage({ data });
    else this.listener?.(data);
  }

  close(code = 1000, reason = '') {
    this.readyState = 3;
    setTimeout(() => this.onclose?.({ code, reason }), 0);
  }
}

/** Message k of the fan-out, as the gateway frames it (a seq, the bench's data). */
export const fanFrame = (k) =>
  '{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"0x1","seq":' +
  k +
  ',"result":{"k":' +
  k +
  ',"price":97000.25,"symbol":"BTC-USD"}}}';

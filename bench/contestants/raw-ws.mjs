// The two raw `ws` floors share this server; they differ only in how a frame is written.
//
// What "echo" means here: the least work that still answers the same wire reply
// as every other contestant, so one load generator serves them all. Each text
// frame is JSON.parse'd and answered with
//   {"jsonrpc":"2.0","result":<params[0] + params[1]>,"id":<id>}
// built by string concatenation: no method lookup, no validation, no error
// replies, no promises. A frame whose method is "subscribe" instead adds the
// socket to the fan-out set and is answered with the result "0x1".
// Fan-out: one frame string per published message,
//   {"jsonrpc":"2.0","method":"subscription","params":{"subscription":"0x1","result":<data>}}
// sent to each subscribed socket in a loop.
import { WebSocketServer } from 'ws';

export async function startRawWs(host, send, { perMessageDeflate = false } = {}) {
  const subscribers = new Set();
  const wss = new WebSocketServer({ host, port: 0, perMessageDeflate });
  await new Promise((resolve) => wss.once('listening', resolve));
  wss.on('connection', (ws) => {
    ws.on('message', (data) => {
      const msg = JSON.parse(data.toString());
      const id = JSON.stringify(msg.id);
      if (msg.method === 'subscribe') {
        subscribers.add(ws);
        send(ws, '{"jsonrpc":"2.0","result":"0x1","id":' + id + '}');
        return;
      }
      send(
        ws,
        '{"jsonrpc":"2.0","result":' + (msg.params[0] + msg.params[1]) + ',"id":' + id + '}',
      );
    });
    ws.on('close', () => subscribers.delete(ws));
  });
  return {
    port: wss.address().port,
    publish(data) {
      const frame =
        '{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"0x1","result":' +
        JSON.stringify(data) +
        '}}';
      for (const ws of subscribers) send(ws, frame);
    },
    close() {
      for (const ws of wss.clients) ws.terminate();
      return new Promise((resolve) => wss.close(() => resolve()));
    },
  };
}

// (3) A minimal hand-written JSON-RPC 2.0 dispatcher on `ws`: what a team writes in an
// afternoon. Validates the envelope, looks the method up, awaits it, answers results and
// the standard errors, skips replies to notifications, handles batches. Fan-out: each
// subscriber gets its own subscription id; the payload is serialized once per message.
import { WebSocketServer } from 'ws';

const error = (id, code, message) =>
  JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id });

async function dispatch(methods, msg, ctx) {
  if (
    msg === null ||
    typeof msg !== 'object' ||
    msg.jsonrpc !== '2.0' ||
    typeof msg.method !== 'string'
  )
    return error(msg?.id ?? null, -32600, 'Invalid Request');
  const isCall = msg.id !== undefined;
  const fn = methods.get(msg.method);
  if (!fn) return isCall ? error(msg.id, -32601, 'Method not found') : undefined;
  try {
    const result = await fn(msg.params, ctx);
    return isCall
      ? JSON.stringify({ jsonrpc: '2.0', result: result ?? null, id: msg.id })
      : undefined;
  } catch {
    return isCall ? error(msg.id, -32603, 'Internal error') : undefined;
  }
}

async function onMessage(methods, ws, text) {
  let msg;
  try {
    msg = JSON.parse(text);
  } catch {
    return ws.send(error(null, -32700, 'Parse error'));
  }
  if (!Array.isArray(msg)) {
    const reply = await dispatch(methods, msg, { ws });
    if (reply !== undefined) ws.send(reply);
    return;
  }
  if (msg.length === 0) return ws.send(error(null, -32600, 'Invalid Request'));
  const replies = (await Promise.all(msg.map((m) => dispatch(methods, m, { ws })))).filter(Boolean);
  if (replies.length > 0) ws.send('[' + replies.join(',') + ']');
}

export default {
  id: 'minimal-jsonrpc',
  name: 'minimal JSON-RPC on ws',
  client: { kind: 'jsonrpc', path: '/', subscribe: { method: 'subscribe', params: ['bench'] } },
  async start(host) {
    const subscribers = new Map(); // ws -> subscription id
    let nextId = 0;
    const methods = new Map([
      ['sum', ([a, b]) => a + b],
      [
        'subscribe',
        (_params, { ws }) => {
          if (!subscribers.has(ws)) subscribers.set(ws, '0x' + (++nextId).toString(16));
          return subscribers.get(ws);
        },
      ],
    ]);
    const wss = new WebSocketServer({ host, port: 0, perMessageDeflate: false });
    await new Promise((resolve) => wss.once('listening', resolve));
    wss.on('connection', (ws) => {
      ws.on('message', (data) => void onMessage(methods, ws, data.toString()));
      ws.on('close', () => subscribers.delete(ws));
    });
    return {
      port: wss.address().port,
      publish(data) {
        const tail = '","result":' + JSON.stringify(data) + '}}';
        for (const [ws, id] of subscribers)
          ws.send(
            '{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"' + id + tail,
          );
      },
      close() {
        for (const ws of wss.clients) ws.terminate();
        return new Promise((resolve) => wss.close(() => resolve()));
      },
    };
  },
};

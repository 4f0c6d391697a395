// The upstream of the upstream scenarios: a JSON-RPC 2.0 over HTTP service in a process of its
// own, as a backend team would write it on plain node:http: each POST body is JSON.parse'd and
// `orders.sum([a, b])` is answered {"jsonrpc":"2.0","result":a+b,"id":id} with keep-alive.
// Every contestant of those scenarios calls this one process (directly, or through a gateway),
// so its CPU per call is measured the same way for all: the runner reads `cpu` around each
// measured window, as it does for a contestant's server.
import { createServer } from 'node:http';
import { nowMs, serve } from './ipc.mjs';

let server;
/** Calls answered with a result, so a slice can check that every call reached this process. */
let served = 0;

function answer(res, status, body) {
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

function handle(req, res) {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    let msg;
    try {
      msg = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      answer(
        res,
        400,
        '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}',
      );
      return;
    }
    const id = JSON.stringify(msg.id ?? null);
    if (msg.method !== 'orders.sum' || !Array.isArray(msg.params)) {
      answer(
        res,
        200,
        `{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":${id}}`,
      );
      return;
    }
    served++;
    answer(res, 200, `{"jsonrpc":"2.0","result":${msg.params[0] + msg.params[1]},"id":${id}}`);
  });
}

serve({
  async start({ host }) {
    server = createServer({ keepAlive: true }, handle);
    // Callers stay idle while the other contestants' slices run: keep their sockets open.
    server.keepAliveTimeout = 120_000;
    await new Promise((resolve) => server.listen(0, host, resolve));
    return { port: server.address().port, pid: process.pid };
  },
  cpu() {
    const { user, system } = process.cpuUsage();
    return { us: user + system, t: nowMs(), served };
  },
  async exit() {
    server?.closeAllConnections();
    await new Promise((resolve) => (server ? server.close(() => resolve()) : resolve()));
  },
});

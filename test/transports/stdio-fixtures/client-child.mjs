// A JSON-RPC client over its own stdin and stdout, the way a language server's client is
// spawned: stdout and stdin carry the protocol (newline-delimited JSON), stderr the report.
// Spawned by test/transports/stdio.test.ts, which serves it with gateway.serveStream.
import { createClient, streamSocket } from '../../../dist/src/index.js';

const client = createClient({
  url: 'stdio:',
  WebSocket: streamSocket(process.stdin, process.stdout),
  reconnect: false,
  heartbeat: false,
});

const subtract = await client.call('subtract', [10, 3]);
const news = await new Promise((resolve, reject) => {
  const received = [];
  const subscription = client.subscribe('news').subscribe({
    next: (message) => {
      received.push(message);
      if (received.length < 2) return;
      subscription.unsubscribe();
      resolve(received);
    },
    error: reject,
  });
});
process.stderr.write(`${JSON.stringify({ subtract, news })}\n`);
await client.close();
process.exitCode = 0;

// The longest event-loop stall one client causes on the gateway: pipelined calls answering
// 1 MiB each (from a plain handler, then from an async one), and the same calls in one batch, on
// a WebSocket (JSON, then MessagePack) and as an HTTP POST.
// The gateway runs in a child process with a 5 ms interval timer; the longest gap between two of
// its ticks while the client's calls are served is the stall every other connection waits
// through. Three rounds each.
//
//   npm run build && node bench/turn-stall.mjs [calls=70]
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';

const CALLS = Number(process.argv[2] ?? 70);

if (process.argv[2] === '--server') {
  const { createGateway } = await import('../dist/src/index.js');
  const { default: pino } = await import('pino');
  const gateway = createGateway({
    heartbeatIntervalMs: 0,
    logger: pino({ level: 'silent' }),
    encodings: ['json', 'msgpack'],
  });
  const answer = 'x'.repeat(1 << 20);
  gateway.method('big', () => answer);
  // The same answer from an async handler: its reply is sent as its promise settles.
  gateway.method('bigAsync', async () => answer);
  const { port } = await gateway.listen(0, '127.0.0.1');
  let last = performance.now();
  let longest = 0;
  setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 5);
  process.on('message', (message) => {
    if (message === 'reset') {
      longest = 0;
      last = performance.now();
    } else if (message === 'report') process.send({ longest });
    else if (message === 'exit') process.exit(0);
  });
  process.send({ port });
} else {
  const server = fork(fileURLToPath(import.meta.url), ['--server']);
  const ask = (message) =>
    new Promise((resolve) => {
      server.once('message', resolve);
      if (message) server.send(message);
    });
  const { port } = await ask();
  const { msgpack } = await import('../dist/src/msgpack.js');
  const open = async (protocols) => {
    const opened = new WebSocket(`ws://127.0.0.1:${port}/rpc`, protocols, { maxPayload: 1 << 30 });
    await new Promise((resolve) => opened.once('open', resolve));
    return opened;
  };
  const socket = await open([]);
  const binary = await open([msgpack.subprotocol]);
  const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const request = (id, method = 'big') => ({ jsonrpc: '2.0', id, method });

  /** Resolves once `replies` messages have arrived on the socket. */
  const replied = (replies, on = socket) =>
    new Promise((resolve) => {
      let got = 0;
      on.on('message', function counted() {
        if (++got < replies) return;
        on.off('message', counted);
        resolve();
      });
    });

  /** One round: `run` sends and resolves once everything is answered. */
  async function round(run) {
    server.send('reset');
    await pause(50);
    const started = performance.now();
    await run();
    const ms = performance.now() - started;
    await pause(100);
    const { longest } = await ask('report');
    return { ms, longest };
  }

  const pipelined = (method) => () => {
    const done = replied(CALLS);
    socket._socket.cork();
    for (let id = 1; id <= CALLS; id++) socket.send(JSON.stringify(request(id, method)));
    socket._socket.uncork();
    return done;
  };
  const batch = JSON.stringify(Array.from({ length: CALLS }, (_, i) => request(i + 1)));
  const scenarios = {
    [`${CALLS} pipelined calls, 1 MiB answers`]: pipelined('big'),
    [`${CALLS} pipelined calls, 1 MiB answers, async handler`]: pipelined('bigAsync'),
    [`one batch of ${CALLS} such calls`]: () => {
      const done = replied(1);
      socket.send(batch);
      return done;
    },
    [`one batch of ${CALLS} such calls, MessagePack`]: () => {
      const done = replied(1, binary);
      binary.send(msgpack.encode(JSON.parse(batch)));
      return done;
    },
    [`one batch of ${CALLS} such calls, HTTP POST`]: async () => {
      const response = await fetch(`http://127.0.0.1:${port}/rpc`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: batch,
      });
      await response.arrayBuffer();
    },
  };
  console.log('| scenario | round | all answered (ms) | longest stall (ms) |');
  console.log('| --- | ---: | ---: | ---: |');
  for (const [name, run] of Object.entries(scenarios)) {
    for (let i = 1; i <= 3; i++) {
      const { ms, longest } = await round(run);
      console.log(`| ${name} | ${i} | ${ms.toFixed(0)} | ${longest.toFixed(0)} |`);
    }
  }
  socket.terminate();
  binary.terminate();
  server.send('exit');
}

// The longest event-loop stall one client causes on the gateway: pipelined calls answering
// 1 MiB each (from a plain handler, then from an async one), and the same calls in one batch.
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
  const gateway = createGateway({ heartbeatIntervalMs: 0, logger: pino({ level: 'silent' }) });
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
  const socket = new WebSocket(`ws://127.0.0.1:${port}/rpc`, { maxPayload: 1 << 30 });
  await new Promise((resolve) => socket.once('open', resolve));
  const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const request = (id, method = 'big') => ({ jsonrpc: '2.0', id, method });

  async function round(send, replies) {
    server.send('reset');
    await pause(50);
    const started = performance.now();
    let got = 0;
    const done = new Promise((resolve) => {
      socket.on('message', function counted() {
        if (++got < replies) return;
        socket.off('message', counted);
        resolve();
      });
    });
    send();
    await done;
    const ms = performance.now() - started;
    await pause(100);
    const { longest } = await ask('report');
    return { ms, longest };
  }

  const scenarios = {
    [`${CALLS} pipelined calls, 1 MiB answers`]: [
      () => {
        socket._socket.cork();
        for (let id = 1; id <= CALLS; id++) socket.send(JSON.stringify(request(id)));
        socket._socket.uncork();
      },
      CALLS,
    ],
    [`${CALLS} pipelined calls, 1 MiB answers, async handler`]: [
      () => {
        socket._socket.cork();
        for (let id = 1; id <= CALLS; id++) socket.send(JSON.stringify(request(id, 'bigAsync')));
        socket._socket.uncork();
      },
      CALLS,
    ],
    [`one batch of ${CALLS} such calls`]: [
      () => socket.send(JSON.stringify(Array.from({ length: CALLS }, (_, i) => request(i + 1)))),
      1,
    ],
  };
  console.log('| scenario | round | all answered (ms) | longest stall (ms) |');
  console.log('| --- | ---: | ---: | ---: |');
  for (const [name, [send, replies]] of Object.entries(scenarios)) {
    for (let i = 1; i <= 3; i++) {
      const { ms, longest } = await round(send, replies);
      console.log(`| ${name} | ${i} | ${ms.toFixed(0)} | ${longest.toFixed(0)} |`);
    }
  }
  socket.terminate();
  server.send('exit');
}

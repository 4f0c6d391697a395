// The client's own CPU without sockets: `node bench/client-cost.mjs [--seconds N] [--in-flight N]
// [--clients N]` (after a build; --in-flight: calls kept in flight, 64 by default; --clients:
// fan-out to N clients in turn, each message to each, 1 by default). A stand-in WebSocket
// answers each `sum` call (the turn's replies delivered together in the next turn, as a
// coalescing server sends them) or hands the client fan-out frames; the same work goes through this project's createClient and through a raw client as the load generator's
// (template-string requests, JSON.parse'd replies, a Map of pending ids; fan-out counters found
// by indexOf, or JSON.parse'd). Each variant runs in a fresh process; CPU is process.cpuUsage()
// across the measured part. The stand-in's own work is in every variant alike. For a profile of
// one variant: `node --cpu-prof bench/client-cost.mjs --only own-rr`.
// CLIENT_MODULE=<path> takes createClient from there instead of the build (e.g. an esbuild
// bundle of src/client/index.ts).
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { fanFrame, StandInSocket } from './stand-in-socket.mjs';

const { values: opts } = parseArgs({
  options: {
    seconds: { type: 'string', default: '3' },
    /** Calls kept in flight on the one connection (rr variants). */
    'in-flight': { type: 'string', default: '64' },
    /** Fan-out variants: clients in this process, each getting every message. */
    clients: { type: 'string', default: '1' },
    only: { type: 'string' },
    child: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (opts.help) {
  console.log(
    'node bench/client-cost.mjs [--seconds N] [--in-flight N] [--clients N] [--only variant]',
  );
  process.exit(0);
}

/** name -> [client, mode, createClient options] */
const VARIANTS = {
  'raw-rr': ['raw', 'rr'],
  'own-rr': ['own', 'rr', {}],
  'own-rr-no-call-timer': ['own', 'rr', { callTimeoutMs: 0 }],
  'raw-fanout': ['raw', 'fanout'],
  'raw-fanout-parse': ['raw', 'fanout-parse'],
  'own-fanout': ['own', 'fanout', {}],
  /** subscribeWithMeta: without subscribe's layer that leaves gap signals out. */
  'own-fanout-meta': ['own', 'fanout', { withMeta: true }],
};
const IN_FLIGHT = Number(opts['in-flight']);
const CLIENTS = Number(opts.clients);

const cpuUs = () => {
  const { user, system } = process.cpuUsage();
  return user + system;
};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function ownClient({ withMeta, ...options }) {
  const { createClient } = await import(process.env.CLIENT_MODULE ?? 'wsrpc-gateway/client');
  const client = createClient({
    url: 'ws://stand-in/rpc',
    WebSocket: StandInSocket,
    reconnect: false,
    ...options,
  });
  await client.opened();
  return {
    socket: StandInSocket.last,
    call: (a) => client.call('sum', [a, 1]),
    subscribe: withMeta
      ? (onData) => client.subscribeWithMeta('bench').subscribe((event) => onData(event.data.k))
      : (onData) => client.subscribe('bench').subscribe((data) => onData(data.k)),
    close: () => client.close(),
  };
}

function rawClient(parseEvery) {
  const socket = new StandInSocket();
  const pending = new Map();
  let nextId = 0;
  let onData = () => undefined;
  socket.listener = (text) => {
    const at = parseEvery ? -1 : text.indexOf('"k":');
    if (at === -1) {
      const msg = JSON.parse(text);
      const k = msg.params?.result?.k;
      if (k !== undefined) return onData(k);
      const resolve = pending.get(msg.id);
      pending.delete(msg.id);
      return resolve?.(msg.result);
    }
    let k = 0;
    for (let i = at + 4, c = text.charCodeAt(i); c >= 48 && c <= 57; c = text.charCodeAt(++i))
      k = k * 10 + c - 48;
    onData(k);
  };
  return {
    socket,
    call: (a) =>
      new Promise((resolve) => {
        const id = ++nextId;
        pending.set(id, resolve);
        socket.send(`{"jsonrpc":"2.0","method":"sum","params":[${a},1],"id":${id}}`);
      }),
    subscribe: (f) => (onData = f),
    close: () => undefined,
  };
}

/** One variant, in this process: its CPU per call or per message (µs). */
async function measure([who, mode, options], seconds) {
  const client = who === 'own' ? await ownClient(options) : rawClient(mode === 'fanout-parse');
  try {
    if (mode === 'rr') {
      let done = 0;
      let running = true;
      const loop = (a) =>
        client.call(a).then((r) => {
          if (r !== a + 1) throw new Error(`wrong result ${r} for ${a}`);
          done++;
          if (running) void loop(a + 1);
        });
      for (let i = 0; i < IN_FLIGHT; i++) void loop(i * 1e9);
      await sleep(1_000);
      const [c0, d0] = [cpuUs(), done];
      await sleep(seconds * 1_000);
      const us = (cpuUs() - c0) / (done - d0);
      running = false;
      await sleep(50);
      return { unit: 'call', us, count: done - d0 };
    }
    // Fan-out: each message goes to every client in turn, as a load process with many
    // subscribers receives it (each client's objects gone cold since its last message).
    const clients = [client];
    for (let i = 1; i < CLIENTS; i++) {
      clients.push(who === 'own' ? await ownClient(options) : rawClient(mode === 'fanout-parse'));
    }
    let got = 0;
    for (const each of clients) {
      let expected = 0;
      each.subscribe((k) => {
        if (k !== ++expected) throw new Error(`message ${k} where ${expected} was due`);
        got++;
      });
    }
    await sleep(50);
    let k = 0;
    const push = (n) => {
      for (let i = 0; i < n; i += CLIENTS) {
        const frame = fanFrame(++k);
        for (const each of clients) each.socket.deliver(frame);
      }
    };
    push(200_000);
    const [c0, g0, t0] = [cpuUs(), got, performance.now()];
    while (performance.now() - t0 < seconds * 1_000) push(10_000);
    const us = (cpuUs() - c0) / (got - g0);
    for (const each of clients.slice(1)) await each.close();
    return { unit: 'message', us, count: got - g0 };
  } finally {
    await client.close();
  }
}

if (opts.child) {
  const result = await measure(VARIANTS[opts.only], Number(opts.seconds));
  process.send(result, () => process.exit(0));
} else if (opts.only && !process.send) {
  // One variant in this process (for --cpu-prof).
  const r = await measure(VARIANTS[opts.only], Number(opts.seconds));
  console.log(`${opts.only}: ${r.us.toFixed(3)} µs per ${r.unit} (${r.count})`);
  process.exit(0);
} else {
  const here = fileURLToPath(import.meta.url);
  console.log('| variant | client CPU µs | per | count |\n| --- | --- | --- | --- |');
  for (const name of Object.keys(VARIANTS)) {
    const args = ['--child', '--only', name, '--seconds', opts.seconds];
    const child = fork(
      here,
      [...args, '--in-flight', opts['in-flight'], '--clients', opts.clients],
      {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      },
    );
    const r = await new Promise((resolve, reject) => {
      child.once('message', resolve);
      child.once('exit', (code) => reject(new Error(`${name} exited ${code}`)));
    });
    console.log(`| ${name} | ${r.us.toFixed(3)} | ${r.unit} | ${r.count} |`);
  }
}

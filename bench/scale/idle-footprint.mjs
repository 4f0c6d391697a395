// Heap per idle connection, a contestant's server beside raw ws's: N WebSocket connections opened
// from a child process and left idle; the server's memory after full collections, before and
// after, divided by N. With --snapshot, a V8 heap snapshot at both points and the objects added
// per connection by kind (what a connection is made of, to the byte).
//
//   node --expose-gc bench/scale/idle-footprint.mjs [--contestant gateway|raw-ws] [--connections N] [--snapshot]
//     [--subscribe few|many] [--per-connection K] [--position | --since]
//
// With --subscribe, the connections are opened first and what is measured is what their
// subscriptions add: each connection subscribes to K topics (10 by default), the same K for all
// (`few`: K topics of N subscribers) or its own share of N topics of K subscribers each (`many`);
// the figures are per subscription. The difference between the two, times K, is what a topic
// adds beyond its subscriptions; `few` with K = 1 (one topic, every connection on it), what a
// connection's first subscription costs, as in the scale run's one-topic phase. With --position,
// each subscribe asks where it starts (`[topic, null, { position: true }]`), as the project's own
// client subscribes to a topic; with --since, each resumes from the topic's start
// (`[topic, null, { since: 0 }]`), as the project's client resubscribes after a reconnect.
//
// The gateway is the package's build (dist/), or SCALE_GATEWAY_MODULE (another build, as for
// the scale run). Prints one JSON line: bytes per connection of heapUsed, of the heap without
// compiled code (code the optimizer makes while connections open is not theirs), external, RSS.
import { fork } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { writeHeapSnapshot } from 'node:v8';
import WebSocket from 'ws';
import { starters } from './contestants.mjs';
import { settledMemory } from './settled-memory.mjs';

const HOST = '127.0.0.1';
const WARM_UP = 200;

/** The topic of a connection's `j`th of k subscriptions: see --subscribe above. */
const topicOf = (layout, i, j, n, k) =>
  layout === 'few' ? `t.${j}` : `t.${(i % (n / k)) * k + j}`;

/** Subscribe every socket to its k topics; resolves once every one is answered. */
function subscribeAll(sockets, layout, k, start) {
  let id = 0;
  const answered = [];
  sockets.forEach((ws, i) => {
    for (let j = 0; j < k; j++) {
      const mine = ++id;
      answered.push(
        new Promise((resolve, reject) => {
          const onMessage = (data) => {
            const reply = JSON.parse(data.toString());
            if (reply.id !== mine) return;
            ws.off('message', onMessage);
            if (reply.error) reject(new Error(`subscribe refused: ${JSON.stringify(reply.error)}`));
            else resolve();
          };
          ws.on('message', onMessage);
        }),
      );
      const topic = topicOf(layout, i, j, sockets.length, k);
      const params = start ? [topic, null, start] : [topic];
      ws.send(JSON.stringify({ jsonrpc: '2.0', method: 'subscribe', params, id: mine }));
    }
  });
  return Promise.all(answered);
}

async function clients() {
  const url = process.argv[3];
  let sockets = [];
  process.on('message', async ({ open, subscribe, perConnection, start }) => {
    if (subscribe) {
      await subscribeAll(sockets, subscribe, perConnection, start);
    } else if (open > 0) {
      for (let i = 0; i < open; i += 200) {
        const batch = [];
        for (let j = i; j < Math.min(open, i + 200); j++) {
          const ws = new WebSocket(url, { perMessageDeflate: false });
          sockets.push(ws);
          batch.push(
            new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject))),
          );
        }
        await Promise.all(batch);
      }
    } else {
      const closing = sockets.map(
        (ws) => new Promise((resolve) => (ws.once('close', resolve), ws.close())),
      );
      sockets = [];
      await Promise.all(closing);
    }
    process.send('done');
  });
}

/** Memory after the connections settled and full collections. */
const memory = () => settledMemory(200);

/** Count and self size of a snapshot's objects, by type and constructor name. */
function objectsOf(file) {
  const { snapshot, nodes, strings } = JSON.parse(readFileSync(file, 'utf8'));
  const fields = snapshot.meta.node_fields;
  const types = snapshot.meta.node_types[0];
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const kinds = new Map();
  for (let i = 0; i < nodes.length; i += fields.length) {
    const type = types[nodes[i + typeAt]];
    const name = /string|number|code/.test(type) ? '' : strings[nodes[i + nameAt]].slice(0, 50);
    const key = `${type} ${name}`;
    const kind = kinds.get(key) ?? { count: 0, bytes: 0 };
    kind.count++;
    kind.bytes += nodes[i + sizeAt];
    kinds.set(key, kind);
  }
  return kinds;
}

function perConnectionObjects(beforeFile, afterFile, n) {
  const before = objectsOf(beforeFile);
  const rows = [];
  for (const [key, after] of objectsOf(afterFile)) {
    const was = before.get(key) ?? { count: 0, bytes: 0 };
    const bytes = (after.bytes - was.bytes) / n;
    if (Math.abs(bytes) >= 2)
      rows.push({
        kind: key,
        count: +((after.count - was.count) / n).toFixed(2),
        bytes: +bytes.toFixed(1),
      });
  }
  return rows.sort((a, b) => b.bytes - a.bytes);
}

async function main() {
  const { values } = parseArgs({
    options: {
      contestant: { type: 'string', default: 'gateway' },
      connections: { type: 'string', default: '2000' },
      snapshot: { type: 'boolean', default: false },
      subscribe: { type: 'string' },
      'per-connection': { type: 'string', default: '10' },
      position: { type: 'boolean', default: false },
      since: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(
      'node --expose-gc bench/scale/idle-footprint.mjs [--contestant gateway|raw-ws] [--connections N] [--snapshot] [--subscribe few|many] [--per-connection K] [--position | --since]',
    );
    return;
  }
  const layout = values.subscribe;
  if (layout !== undefined && layout !== 'few' && layout !== 'many') {
    throw new Error(`--subscribe must be few or many, not ${layout}`);
  }
  if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc');
  const n = Number(values.connections);
  const perConnection = Number(values['per-connection']);
  if (!Number.isSafeInteger(perConnection) || perConnection < 1) {
    throw new Error(
      `--per-connection must be a whole number from 1, not ${values['per-connection']}`,
    );
  }
  const server = await starters[values.contestant](HOST, { connections: n });
  const url = `ws://${HOST}:${server.port}/rpc`;
  const child = fork(new URL(import.meta.url), ['--clients', url], { execArgv: [] });
  const tell = (message) =>
    new Promise((resolve) => {
      child.once('message', resolve);
      child.send(message);
    });
  const ask = (open) => tell({ open });
  // Warm up: the code and the shared objects a first connection makes.
  for (let round = 0; round < 2; round++) {
    await ask(WARM_UP);
    await ask(0);
  }
  const snapshots = join(tmpdir(), `idle-footprint-${process.pid}`);
  // What is measured: n connections opening, or, with --subscribe, their subscriptions.
  if (layout) await ask(n);
  const units = layout ? n * perConnection : n;
  const before = await memory();
  if (values.snapshot) writeHeapSnapshot(`${snapshots}.0.heapsnapshot`);
  const start = values.since ? { since: 0 } : values.position ? { position: true } : undefined;
  if (layout) await tell({ subscribe: layout, perConnection, start });
  else await ask(n);
  const after = await memory();
  if (values.snapshot) writeHeapSnapshot(`${snapshots}.1.heapsnapshot`);
  const per = (key) => Math.round((after[key] - before[key]) / units);
  const result = {
    contestant: values.contestant,
    connections: n,
    ...(layout && { subscriptions: units, topics: layout === 'few' ? perConnection : n }),
    heapUsed: per('heapUsed'),
    heapNoCode: per('heapNoCode'),
    external: per('external'),
    rss: per('rss'),
  };
  console.log(JSON.stringify(result));
  if (values.snapshot) {
    for (const row of perConnectionObjects(
      `${snapshots}.0.heapsnapshot`,
      `${snapshots}.1.heapsnapshot`,
      units,
    )) {
      console.log(
        `${String(row.bytes).padStart(8)} B ${String(row.count).padStart(6)}  ${row.kind}`,
      );
    }
    rmSync(`${snapshots}.0.heapsnapshot`);
    rmSync(`${snapshots}.1.heapsnapshot`);
  }
  await ask(0);
  child.kill();
  await server.close();
  process.exit(0);
}

if (process.argv[2] === '--clients') await clients();
else await main();

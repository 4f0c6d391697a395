// Heap held while calls are in flight (docs/security-and-limits.md, maxInFlight): one WebSocket
// connection, maxInFlight (128) calls whose params are a ~1 MiB string each (maxMessageBytes
// 1 MiB), held until released. After `npm run build`:
//   node --expose-gc bench/in-flight-params.mjs retain|drop|authorize
// retain: the handler's pending work refers to its params; drop: it does not; authorize: an
// async authorize hook settles only when released (the handler then drops them). Prints the heap
// and external memory held while the calls run and after they have settled, in MiB.
import { createGateway } from '../dist/src/index.js';
import { silentLogger } from '../dist/src/peer/logger.js';
import { WebSocket } from 'ws';
const MiB = 1024 * 1024;
const RETAIN = process.argv[2] === 'retain';
const AUTHORIZE = process.argv[2] === 'authorize';
const authorizing = [];
const gateway = createGateway({
  heartbeatIntervalMs: 0,
  logger: silentLogger,
  limits: { bytesPerSecond: 0, bytesPerSecondPerIp: 0, ratePerSecond: 0 },
  ...(AUTHORIZE
    ? { authorize: () => new Promise((resolve) => authorizing.push(() => resolve(true))) }
    : {}),
});
const waiting = [];
// Two functions: closures made in one function share its context, params included.
const retaining = (params) =>
  new Promise((resolve) => waiting.push(() => resolve(params[0].length)));
const dropping = () => new Promise((resolve) => waiting.push(() => resolve(1)));
gateway.method('hold', RETAIN ? retaining : dropping);
const { port } = await gateway.listen(0, '127.0.0.1');
const used = () => {
  global.gc();
  global.gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
};
const before = used();
const ws = new WebSocket(`ws://127.0.0.1:${port}/rpc`);
await new Promise((r) => ws.once('open', r));
const N = 128;
const pad = 'x'.repeat(MiB - 100);
let answers = 0;
let busy = 0;
ws.on('message', (d) => (JSON.parse(d.toString()).error ? busy++ : answers++));
for (let i = 0; i <= N; i++)
  ws.send(JSON.stringify({ jsonrpc: '2.0', id: i, method: 'hold', params: [String(i) + pad] }));
while ((AUTHORIZE ? authorizing : waiting).length < N || busy < 1)
  await new Promise((r) => setTimeout(r, 20));
const holding = used();
for (const release of authorizing.splice(0)) release();
while (waiting.length < N) await new Promise((r) => setTimeout(r, 20));
for (const release of waiting.splice(0)) release();
while (answers < N) await new Promise((r) => setTimeout(r, 20));
const after = used();
console.log(
  JSON.stringify({
    case: process.argv[2],
    inFlight: N,
    refusedBusy: busy,
    heldWhileRunningMiB: +((holding - before) / MiB).toFixed(1),
    heldAfterSettledMiB: +((after - before) / MiB).toFixed(1),
  }),
);
ws.close();
await gateway.close({ timeoutMs: 1000 });
process.exit(0);

// What checking a broker message's payload costs (src/pubsub/sendable-payload.ts: done once per
// message per node for brokers whose payloads are not trusted, Redis and NATS): CPU time per
// check for payloads of a few sizes. `node bench/payload-check.mjs` (run `npm run build` first).
import { isSendablePayload } from '../dist/src/pubsub/sendable-payload.js';

/** A topic message's JSON text with `n` small items. */
const payloadOf = (n) =>
  JSON.stringify({
    symbol: 'BTC-USD',
    items: Array.from({ length: n }, (_, i) => ({ i, price: 97000.25 + i, name: `x${i}` })),
  });

for (const n of [1, 100, 1000, 5000]) {
  const payload = payloadOf(n);
  const reps = n > 1000 ? 500 : 20_000;
  let sendable = 0;
  for (let i = 0; i < 2_000; i++) sendable += isSendablePayload(payload) ? 1 : 0; // warm-up
  const start = process.cpuUsage();
  for (let i = 0; i < reps; i++) sendable += isSendablePayload(payload) ? 1 : 0;
  const { user, system } = process.cpuUsage(start);
  if (sendable !== reps + 2_000) throw new Error('a payload read as not sendable');
  console.log(`${payload.length} bytes: ${((user + system) / reps).toFixed(2)} µs per check`);
}

// What the gateway's guarded parse costs over a bare JSON.parse, per message: `node
// bench/parse-guard.mjs` (after `npm run build`). parseJson is what every incoming text frame
// goes through (src/protocol/safe-json.ts: the depth check at the server's maxDepth 64, the
// value count, the prototype-key check); three request shapes of a few hundred characters, as
// applications send them. Prints ns per message for each and the ratio to JSON.parse alone.
import { parseJson } from '../dist/src/protocol/safe-json.js';

const shapes = {
  order: {
    jsonrpc: '2.0',
    method: 'orders.place',
    params: {
      symbol: 'BTC-USD',
      side: 'buy',
      qty: 0.25,
      price: 97000.25,
      tags: ['a', 'b'],
      client: { id: 'abc-123', ts: 1733150000000 },
    },
    id: 17,
  },
  chat: {
    jsonrpc: '2.0',
    method: 'chat.send',
    params: { room: 'general', text: 'x'.repeat(400) },
    id: 18,
  },
  grid: {
    jsonrpc: '2.0',
    method: 'grid.put',
    params: { rows: Array.from({ length: 10 }, (_, i) => [i, i + 1, i + 2]) },
    id: 19,
  },
};

const N = 1_000_000;
function nsPerMessage(parse, text) {
  let sink = 0;
  const started = process.hrtime.bigint();
  for (let i = 0; i < N; i++) sink += parse(text) === undefined ? 0 : 1;
  if (sink !== N) throw new Error('a parse failed');
  return Number(process.hrtime.bigint() - started) / N;
}

console.log(
  '| message | characters | JSON.parse ns | parseJson ns | × JSON.parse |\n|---|---|---|---|---|',
);
for (const [name, value] of Object.entries(shapes)) {
  const text = JSON.stringify(value);
  const guarded = (t) => parseJson(t, 64, 10_000);
  // Warm both up, then take the better of three alternated runs of each.
  nsPerMessage(JSON.parse, text);
  nsPerMessage(guarded, text);
  let bare = Infinity;
  let ours = Infinity;
  for (let round = 0; round < 3; round++) {
    bare = Math.min(bare, nsPerMessage(JSON.parse, text));
    ours = Math.min(ours, nsPerMessage(guarded, text));
  }
  console.log(
    `| ${name} | ${text.length} | ${bare.toFixed(0)} | ${ours.toFixed(0)} | ${(ours / bare).toFixed(2)} |`,
  );
}

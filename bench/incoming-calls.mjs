// What answering a call with an asynchronous handler costs the answering side, without sockets:
// `node bench/incoming-calls.mjs [--in-flight N] [--calls N] [--rounds N] [--root DIR]` (after a
// build). IncomingCalls (src/peer/incoming-calls.ts) runs `work`, an async handler, N calls at a
// time until --calls have been answered; each round prints ns per call, and the median of the
// rounds closes the line. The handler is the least one can be (it returns its param), so what
// is measured is the bookkeeping around it: the call's context, its place among the running
// calls, its reply. --root takes the build from another checkout (one of an older commit, say),
// to set two builds side by side in alternate runs.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { median } from './stats.mjs';

const { values: opts } = parseArgs({
  options: {
    'in-flight': { type: 'string', default: '1' },
    calls: { type: 'string', default: '200000' },
    rounds: { type: 'string', default: '7' },
    root: { type: 'string', default: new URL('..', import.meta.url).pathname },
    help: { type: 'boolean', default: false },
  },
});
if (opts.help) {
  console.log(
    'node bench/incoming-calls.mjs [--in-flight N] [--calls N] [--rounds N] [--root DIR]',
  );
  process.exit(0);
}

const root = resolve(opts.root);
const load = (path) => import(pathToFileURL(`${root}/dist/src/peer/${path}`).href);
const [{ IncomingCalls }, { MethodRegistry }, { peerConfig }, { silentLogger }] = await Promise.all(
  [
    load('incoming-calls.js'),
    load('method-registry.js'),
    load('peer-options.js'),
    load('logger.js'),
  ],
);

const IN_FLIGHT = Number(opts['in-flight']);
const CALLS = Number(opts.calls);
const registry = new MethodRegistry();
registry.method('work', async (params) => params[0]);
const incoming = new IncomingCalls('bench', silentLogger, peerConfig({ registry }), undefined);
const params = [1];

async function round() {
  const started = process.hrtime.bigint();
  for (let i = 0; i < CALLS; i += IN_FLIGHT) {
    const replies = [];
    for (let j = 0; j < IN_FLIGHT; j++)
      replies.push(incoming.request(i + j, 'work', params, '2.0'));
    const answered = await Promise.all(replies);
    if (answered.some((reply) => !reply.includes('"result":1'))) {
      throw new Error(`a call was not answered with its result: ${answered.join(' ')}`);
    }
  }
  if (incoming.inFlightCount !== 0) throw new Error(`${incoming.inFlightCount} calls left running`);
  return Number(process.hrtime.bigint() - started) / CALLS;
}

const perCall = [];
for (let i = 0; i < Number(opts.rounds); i++) perCall.push(await round());
console.log(
  `${root}: ${IN_FLIGHT} in flight, ns per call ${perCall.map((ns) => ns.toFixed(0)).join(' ')}; median ${median(perCall).toFixed(0)}`,
);

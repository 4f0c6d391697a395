import { readFileSync } from 'node:fs';
const p = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const self = new Map();
const dt = p.timeDeltas; let total = 0;
const counts = new Map();
for (let i = 0; i < p.samples.length; i++) { counts.set(p.samples[i], (counts.get(p.samples[i]) ?? 0) + (dt[i] ?? 0)); total += dt[i] ?? 0; }
const agg = new Map(); const aggFile = new Map();
for (const [id, t] of counts) {
  const n = byId.get(id); const cf = n.callFrame;
  const key = `${cf.functionName || '(anon)'} ${cf.url.split('/').slice(-2).join('/')}:${cf.lineNumber}`;
  agg.set(key, (agg.get(key) ?? 0) + t);
  const f = cf.url.split('/').slice(-2).join('/') || cf.functionName;
  aggFile.set(f, (aggFile.get(f) ?? 0) + t);
}
const top = (m, k) => [...m].sort((a, b) => b[1] - a[1]).slice(0, k).map(([n, t]) => `${(100 * t / total).toFixed(1).padStart(5)}% ${n}`).join('\n');
console.log(top(agg, 45)); console.log('--- files'); console.log(top(aggFile, 25));

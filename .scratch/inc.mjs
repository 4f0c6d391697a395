const frames = Array.from({length: 1000}, (_, k) => '{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"0x1","seq":' + k + ',"result":{"k":' + k + ',"price":97000.25,"symbol":"BTC-USD"}}}');
for (const f of frames) Number(f);
const RE = /__proto__|constructor|\\u/;
const variants = {
  parse: (t) => JSON.parse(t),
  includes3: (t) => t.includes('__proto__') || t.includes('constructor') || t.includes('\\u'),
  regex: (t) => RE.test(t),
  notValue: (t) => /^\s*(?:$|[^\s"\-\d[{tfn])/.test(t),
};
for (let round = 0; round < 3; round++) for (const [name, fn] of Object.entries(variants)) {
  let x = 0; const N = 3_000_000; const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) { if (fn(frames[i % 1000])) x++; }
  const ns = Number(process.hrtime.bigint() - t0) / N;
  if (round === 2) console.log(name, ns.toFixed(1), 'ns', x);
}

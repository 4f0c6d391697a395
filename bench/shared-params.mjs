// What a shared-connection tab's main thread pays to post a call's params to the worker, the two
// ways: the params made JSON, read back into objects and structured-cloned (the objects cross),
// against the JSON text alone structured-cloned (the text crosses; the worker reads it back).
// structuredClone stands in for the port's postMessage, which clones the same way. CPU time
// per post, after a warm-up, for 2,000 rows and for a small object.
//
//   node bench/shared-params.mjs
const rows = {
  rows: Array.from({ length: 2000 }, (_, i) => ({
    id: i,
    name: `item ${i}`,
    tags: ['a', 'b', 'c'],
    price: i * 1.5,
    nested: { x: i, y: [i, i + 1] },
  })),
};
const small = { a: 1, b: 'two', c: [3, 4] };

function perPost(post, n) {
  for (let i = 0; i < n / 10; i++) post();
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) post();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / n;
}

for (const [name, params, n] of [
  ['2,000 rows', rows, 200],
  ['small object', small, 200_000],
]) {
  const objects = perPost(() => structuredClone(JSON.parse(JSON.stringify([params]))[0]), n);
  const text = perPost(() => structuredClone(JSON.stringify([params])), n);
  console.log(
    `${name}: objects ${objects.toFixed(2)} µs, text ${text.toFixed(2)} µs (${(objects / text).toFixed(1)}×)`,
  );
}

import fc from 'fast-check';
const spelled = (key) => fc.oneof({ weight: 2, arbitrary: fc.constant([]) }, fc.array(fc.boolean(), { minLength: key.length, maxLength: key.length }))
  .map((escape) => [...key].map((c, i) => (escape[i] ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}` : c)).join(''));
const keys = fc.constantFrom('__proto__', 'constructor', 'prototype', 'proto', 'a', 'b');
const member = keys.chain((key) => spelled(key).map((text) => ({ key, text })));
const value = fc.letrec((tie) => ({ text: fc.oneof({ maxDepth: 4, withCrossShrink: true },
  fc.constantFrom('1', '"x"', 'null', '"__proto__"', '"prototype"'),
  fc.array(tie('text'), { maxLength: 3 }).map((items) => `[${items.join(',')}]`),
  { weight: 3, arbitrary: fc.array(fc.tuple(member, tie('text')), { maxLength: 3 }).map((members) => `{${members.map(([m, v]) => `"${m.text}":${v}`).join(',')}}`) }) })).text;
const xs = fc.sample(value, 500);
console.log(xs.filter(x => x.includes('"constructor":{')).length, xs.filter(x => /"constructor":\{[^}]*"prototype"/.test(x)).length);
console.log(xs.slice(0,5));
const v = JSON.parse('{"constructor":{"prototype":1}}'); console.log(Object.prototype.hasOwnProperty.call(v,'constructor'));
const miss = xs.filter(x => !x.includes('__proto__') && !x.includes('\\u') && /"constructor":\{[^}]*"prototype"/.test(x));
console.log('missed under mutation', miss.length, miss.slice(0,3));

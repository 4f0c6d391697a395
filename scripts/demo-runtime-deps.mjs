// For an image that runs the demo (`node dist/demo/main.js`) from this repository: moves the
// packages the demo needs at run time but the package does not depend on (the brokers' clients
// and jose, optional peers of the package; zod, which the demo's contract uses) from
// devDependencies to dependencies in ./package.json, so that `npm prune --omit=dev` that follows keeps them (it
// reads package.json; the versions installed by `npm ci` stay). The Dockerfile's build stage:
//   RUN npm run build && node scripts/demo-runtime-deps.mjs && npm prune --omit=dev
// Never run it in a clone you commit from: it rewrites package.json.
import { readFileSync, writeFileSync } from 'node:fs';

const demoNeeds = ['ioredis', '@nats-io/transport-node', '@nats-io/jetstream', 'zod', 'jose'];
const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
for (const name of demoNeeds) {
  const range = pkg.devDependencies?.[name] ?? pkg.dependencies?.[name];
  if (range === undefined)
    throw new Error(`${name} is in neither dependencies nor devDependencies`);
  delete pkg.devDependencies?.[name];
  pkg.dependencies = { ...pkg.dependencies, [name]: range };
}
writeFileSync('package.json', `${JSON.stringify(pkg, null, 2)}\n`);
console.log(`dependencies for the demo's image: ${demoNeeds.join(', ')}`);

import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { filesByTier, sharedModuleTiers, tiers } from './test/support/tiers.js';

// Each tier is a project of its own (which file goes where, and which tiers share modules
// between files: test/support/tiers.ts), so `vitest run --project unit` runs the fast tier
// alone; `vitest run` runs them all.
const byTier = filesByTier(fileURLToPath(new URL('.', import.meta.url)));

// Two shared cores: cap workers so socket-heavy suites do not starve each other.
export default defineConfig({
  test: {
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 20_000,
    hookTimeout: 20_000,
    projects: tiers.map((name) => ({
      extends: true,
      test: { name, include: byTier[name], isolate: !sharedModuleTiers.includes(name) },
    })),
  },
});

import { defineConfig } from 'vitest/config';

// Two shared cores: cap workers so socket-heavy suites do not starve each other.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 20_000,
    hookTimeout: 20_000,
  },
});

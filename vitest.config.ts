import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // PGlite instances are memory-hungry WebAssembly; two cores run two forks well.
    pool: 'forks',
    maxWorkers: 2,
  },
});

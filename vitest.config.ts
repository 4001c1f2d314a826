import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // End-to-end tests start processes that create a PGlite folder (initdb) on a loaded 2-core box.
    testTimeout: 120_000,
    hookTimeout: 60_000,
    // PGlite instances are memory-hungry WebAssembly; two cores run two forks well.
    pool: 'forks',
    maxWorkers: 2,
  },
});

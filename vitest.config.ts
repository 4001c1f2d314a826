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
    // The suite reads TEST_DATABASE_URL only: a service the tests start never inherits the
    // variables an operator exports for production.
    env: { DATABASE_URL: '', DATABASE_READ_URL: '', REDIS_URL: '', DUNWALL_ADMIN_TOKEN: '', DUNWALL_ENCRYPTION_KEY: '', DUNWALL_ENCRYPTION_KEYS_OLD: '', TRUST_PROXY: '' },
  },
});

import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // The examples of docs/servers.md import @dunwall/node by its name: its source, here.
  resolve: { alias: { '@dunwall/node': fileURLToPath(new URL('./packages/node/src/index.ts', import.meta.url)) } },
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
    env: {
      DATABASE_URL: '',
      DATABASE_READ_URL: '',
      REDIS_URL: '',
      DUNWALL_ADMIN_TOKEN: '',
      DUNWALL_ENCRYPTION_KEY: '',
      DUNWALL_ENCRYPTION_KEYS_OLD: '',
      TRUST_PROXY: '',
    },
  },
});

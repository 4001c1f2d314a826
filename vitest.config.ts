import { accessSync, constants, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { LongestFirstSequencer } from './test/helpers/sequencer.js';

/**
 * The suite writes and deletes thousands of short-lived files (an embedded store is a folder of
 * ~1,000 files, copied for each store a test opens; packed packages are installed into projects
 * of their own). On a disk-backed temporary folder a copy and a delete of one store take seconds
 * on a loaded runner; on a memory-backed one, a fraction. Where the system has one and the run
 * was given no TMPDIR, every test process and what it starts uses it.
 */
function memoryBackedTmp(): string | null {
  const dir = '/dev/shm';
  try {
    if (!statSync(dir).isDirectory()) return null;
    accessSync(dir, constants.W_OK);
    return dir;
  } catch {
    return null;
  }
}
if (!process.env.TMPDIR) {
  const dir = memoryBackedTmp();
  if (dir !== null) process.env.TMPDIR = dir;
}

export default defineConfig({
  // The examples of docs/servers.md import @dunwall/node by its name: its source, here; and the browser packages
  // import what they share by its name, @dunwall/core.
  resolve: {
    alias: {
      '@dunwall/core': fileURLToPath(new URL('./packages/core/src/index.ts', import.meta.url)),
      '@dunwall/node': fileURLToPath(new URL('./packages/node/src/index.ts', import.meta.url)),
      '@dunwall/wire': fileURLToPath(new URL('./packages/wire/src/index.ts', import.meta.url)),
    },
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // `vi.waitFor` without a bound of its own waits as long as `expect.poll` below.
    setupFiles: ['test/helpers/waits.ts'],
    // A poll returns once what it waits for is there; its bound is only how long a failing test
    // takes to fail. Vitest's default, one second, failed passing tests on a loaded machine
    // (a page load, a catch-up of another process). Below the test's timeout, so the failure
    // names what was awaited.
    expect: { poll: { timeout: 60_000 } },
    // The longest files first on a fresh clone (test/helpers/sequencer.ts); once a run has
    // left durations, vitest's own order (failed first, then longest first).
    sequence: { sequencer: LongestFirstSequencer },
    // End-to-end tests start processes that create a PGlite folder (initdb) on a loaded 2-core box.
    // A file's setup (a service process, Chromium and a seeded tenant, started together) does as
    // much as a test: it has the same bound (60 s failed one such setup on a loaded machine).
    testTimeout: 120_000,
    hookTimeout: 120_000,
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

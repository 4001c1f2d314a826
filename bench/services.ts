/** The processes a row measures: `dunwall serve` on the bench store, or a script of bench/. */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SEMI_SPACE_FLAG } from '../src/runtime/cluster.js';
import { MAX_RATE_LIMIT } from '../src/runtime/config.js';
import type { BenchContext, Server } from './context.js';
import { log, note } from './lifecycle.js';
import type { BenchOptions } from './options.js';
import { StartError, freePort, spawnChild, stopChild, waitReady } from './procs.js';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const CLI = join(ROOT, 'dist', 'src', 'cli', 'main.js');

// The load comes from one address for one tenant: the limits stay on (their cost is part
// of what is measured) but far above what the load sends.
// The admin quota too: the secretkey row creates a key per tenant (1,000) before it is measured.
const BENCH_RATE_LIMITS = {
  DUNWALL_RATE_LIMIT_LOOKUP_PER_IP: String(MAX_RATE_LIMIT),
  DUNWALL_RATE_LIMIT_LOOKUP_PER_TENANT: String(MAX_RATE_LIMIT),
  DUNWALL_RATE_LIMIT_ADMIN_PER_IP: String(MAX_RATE_LIMIT),
};

/** The environment of this process, less what would point a child at another store or port. */
const baseEnv = Object.fromEntries(
  Object.entries(process.env).filter(
    ([k]) => !/^(DATABASE_URL|DATABASE_READ_URL|DUNWALL_.*|PORT|HOST|LOG_LEVEL|NODE_OPTIONS)$/.test(k),
  ),
);

export function starters(env: {
  opts: BenchOptions;
  workDir: string;
  storeEnv: Record<string, string>;
  adminToken: string;
  /** Whether --workers was passed; `rejected` once serve refused it. */
  service: BenchContext['service'];
}): Pick<BenchContext, 'startService' | 'startScript'> {
  const { opts, workDir, storeEnv, adminToken } = env;
  const state = env.service;
  async function startService(
    name: string,
    overrides: { env?: Record<string, string>; workers?: number } = {},
  ): Promise<Server> {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const env = {
      ...baseEnv,
      ...storeEnv,
      ...overrides.env,
      ...BENCH_RATE_LIMITS,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      DUNWALL_ADMIN_TOKEN: adminToken,
    };
    const workers = overrides.workers ?? (state.workersFlag === 'passed' ? opts.workers : null);
    const flag = workers !== null ? ['--workers', String(workers)] : [];
    log(`starting ${name}: node ${SEMI_SPACE_FLAG} dist/src/cli/main.js serve ${flag.join(' ')}`.trimEnd());
    // As `npm start` runs it (a cluster's workers get the flag from their primary).
    const child = spawnChild(name, process.execPath, [SEMI_SPACE_FLAG, CLI, 'serve', ...flag], {
      env,
      cwd: ROOT,
      logPath: join(workDir, `${name}.log`),
    });
    try {
      await waitReady(child, `${url}/readyz`, 120_000);
    } catch (err) {
      await stopChild(child);
      if (flag.length > 0 && err instanceof StartError && err.exitCode === 2 && /workers/i.test(err.log)) {
        state.workersFlag = 'rejected';
        note(`serve rejected --workers (${err.log.split('\n').at(-1) ?? ''}): the service ran as one process`);
        return startService(name, overrides);
      }
      if (err instanceof StartError) log(`${name}'s log:\n${err.log}`);
      throw err;
    }
    return { child, url };
  }

  async function startScript(name: string, script: string, env: Record<string, string>): Promise<Server> {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    log(`starting ${name}: node --import tsx bench/${script}`);
    const child = spawnChild(name, process.execPath, ['--import', 'tsx', join(ROOT, 'bench', script)], {
      env: { ...baseEnv, ...env, PORT: String(port), HOST: '127.0.0.1' },
      cwd: ROOT,
      logPath: join(workDir, `${name}.log`),
    });
    try {
      await waitReady(child, `${url}/readyz`, 120_000);
    } catch (err) {
      await stopChild(child);
      if (err instanceof StartError) log(`${name}'s log:\n${err.log}`);
      throw err;
    }
    return { child, url };
  }
  return { startService, startScript };
}

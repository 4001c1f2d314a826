/**
 * `npm run bench`: seeds a store, then measures side by side, with one load generator, the
 * same connections and the same duration: a bare node:http baseline, the service (hot,
 * unknown, Zipf, one hot customer, right after a start) and a query-per-request peer; then
 * the read model's memory per subscriber and load time, and the propagation delay across
 * two instances on PostgreSQL. Prints a table and writes bench/results/<ISO time>.json.
 * See bench/README.md.
 *
 * main: the options -> the store -> the questions -> each row of the registry (rows/index.ts)
 * asked for -> the summary.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { StoreTarget } from '../src/store/index.js';
import type { BenchContext, BenchStore, Findings, Questions } from './context.js';
import { RequestFactory } from './data.js';
import type { Entitlements, Sizes } from './data.js';
import { cleanup, cleanups, log, note, started, stopping } from './lifecycle.js';
import { detectGenerator, writeLines } from './load.js';
import { measurer } from './measure.js';
import { OWN_SEED_ROWS, parseOptions, STORELESS_ROWS } from './options.js';
import type { RowResult } from './report.js';
import { BENCH_ROWS } from './rows/index.js';
import { HOT_COUNT, UNKNOWN_COUNT, ZIPF_S } from './rows/lookup.js';
import { backendPids, createDatabase, dropDatabase, inspect, seed } from './seed.js';
import { CLI, ROOT, starters } from './services.js';
import { summarize } from './summary.js';

const opts = parseOptions();

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

function buildIfStale(): void {
  const stale = !existsSync(CLI) || newestMtime(join(ROOT, 'src')) > statSync(CLI).mtimeMs;
  if (!stale) return;
  if (!opts.build) {
    if (!existsSync(CLI)) throw new Error('dist/ is missing: run npm run build (or drop --no-build)');
    note('dist/ is older than src/ and --no-build was given: measuring the older build');
    return;
  }
  log('dist/ is older than src/: npm run build');
  const res = spawnSync('npm', ['run', 'build'], { cwd: ROOT, encoding: 'utf8', timeout: 300_000 });
  if (res.status !== 0) {
    const output = `${res.stdout ?? ''}${res.stderr ?? ''}`.trim().split('\n').slice(-15).join('\n');
    if (!existsSync(CLI)) throw new Error(`npm run build failed:\n${output}`);
    note(`npm run build failed (someone is editing src/?); measuring what dist/ holds:\n${output}`);
  }
}

/** The bench's store: none, a fresh (or reused) database on DATABASE_URL's server, or an embedded folder. */
async function openBenchStore(startedAt: Date, workDir: string, needsStore: boolean): Promise<BenchStore> {
  const serverUrl = needsStore ? process.env.DATABASE_URL?.trim() || null : null;
  let target: StoreTarget = { engine: 'embedded', dataDir: null };
  let storeEnv: Record<string, string> = {};
  let storeLabel = `none (the rows asked for, ${[...opts.rows].join(', ')}, need no store)`;
  let peerEnv: Record<string, string> = {};
  /** PostgreSQL: the bench database's backends, whose CPU is the database's share of a row. */
  let dbPids: () => Promise<number[]> = async () => [];
  if (!needsStore) {
    // Nothing to make: the rows below that need a store are not run.
  } else if (serverUrl !== null) {
    const name = opts.reuse ?? `dunwall_bench_${startedAt.toISOString().replace(/\D/g, '').slice(0, 17)}`;
    let url: string;
    if (opts.reuse === null) {
      url = await createDatabase(serverUrl, name);
      cleanups.push(async () => {
        if (opts.keep) {
          log(`kept the database ${name} (--reuse ${name})`);
          return;
        }
        await dropDatabase(serverUrl, name);
        log(`dropped the database ${name}`);
      });
    } else {
      const u = new URL(serverUrl);
      u.pathname = `/${name}`;
      url = u.toString();
    }
    target = { engine: 'postgres', url };
    dbPids = () => backendPids(serverUrl, name).catch(() => []);
    storeEnv = { DATABASE_URL: url };
    peerEnv = { PEER_DATABASE_URL: url };
    storeLabel = `PostgreSQL, database ${name}`;
  } else {
    const dataDir = opts.reuse === null ? join(workDir, 'data') : resolve(opts.reuse);
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    if (opts.keep && opts.reuse === null) {
      // The work folder goes unless --keep: the store is in it.
      log(`the embedded store is in ${dataDir} (--reuse ${dataDir})`);
    }
    target = { engine: 'embedded', dataDir: join(dataDir, 'pgdata') };
    storeEnv = { DUNWALL_DATA_DIR: dataDir, DUNWALL_DEMO: '0' };
    peerEnv = { PEER_PGLITE_DIR: join(dataDir, 'pgdata') };
    storeLabel = `embedded (PGlite) in ${dataDir}`;
  }
  log(`store: ${storeLabel}`);
  return { target, serverUrl, env: storeEnv, peerEnv, label: storeLabel, dbPids };
}

/** The main seed (or what a reused store holds), and the request lists the load rows ask. */
async function askQuestions(target: StoreTarget, workDir: string, needsStore: boolean, needsMainSeed: boolean) {
  let sizes: Sizes = { tenants: 0, perTenant: 0 };
  let tiers: Entitlements = {};
  let seedSeconds: number | null = null;
  if (!needsMainSeed) {
    // No bench subscribers: the request lists below are empty (the rows asked for seed their own).
  } else if (opts.reuse === null) {
    log(
      `seeding ${opts.sizes.tenants.toLocaleString('en-US')} tenants, ${(opts.sizes.tenants * opts.sizes.perTenant).toLocaleString('en-US')} subscribers`,
    );
    const seeded = await seed(target, opts.sizes, (l) => log(`seed: ${l}`));
    ({ sizes, tiers } = seeded);
    seedSeconds = seeded.seconds;
    log(`seeded in ${seeded.seconds.toFixed(1)} s`);
  } else {
    ({ sizes, tiers } = await inspect(target));
    log(`reusing ${sizes.tenants} tenants x ${sizes.perTenant} subscribers`);
  }

  const factory = new RequestFactory(sizes, tiers);
  const total = factory.total;
  const hot = factory.hot(HOT_COUNT);
  const unknown = needsStore ? factory.unknown(UNKNOWN_COUNT) : [];
  const zipf =
    opts.rows.has('zipf') || opts.rows.has('zipfcold')
      ? factory.zipf(opts.zipfLength, ZIPF_S)
      : { requests: [], distinct: 0 };
  // One popular customer asked over and over: the hot-key case of a map or a counter.
  const hotkey = hot.slice(0, 1);
  const files = {
    hot: join(workDir, 'hot.txt'),
    unknown: join(workDir, 'unknown.txt'),
    zipf: join(workDir, 'zipf.txt'),
    hotkey: join(workDir, 'hotkey.txt'),
  };
  writeLines(files.hot, hot);
  writeLines(files.unknown, unknown);
  writeLines(files.zipf, zipf.requests);
  writeLines(files.hotkey, hotkey);
  log(
    `request lists: ${hot.length} hot, ${unknown.length} unknown, ${zipf.requests.length} Zipf (${zipf.distinct} distinct subscribers)`,
  );

  // The baseline answers the body of a hot answer of the hot set's mean size.
  const meanSize = hot.reduce((sum, r) => sum + Buffer.byteLength(r.expected), 0) / Math.max(1, hot.length);
  const baselineBody =
    [...hot].sort((x, y) => Math.abs(x.expected.length - meanSize) - Math.abs(y.expected.length - meanSize))[0]
      ?.expected ?? '{"status":"active"}';
  const questions: Questions = {
    factory,
    sizes,
    tiers,
    total,
    hot,
    unknown,
    zipf,
    hotkey,
    files,
    baselineBody,
  };
  return { questions, seedSeconds };
}

async function main(): Promise<void> {
  const startedAt = new Date(started);
  const workDir = mkdtempSync(join(tmpdir(), 'dunwall-bench-'));
  cleanups.push(async () => {
    if (opts.keep) log(`kept the work folder ${workDir}`);
    else rmSync(workDir, { recursive: true, force: true });
  });
  const asked = BENCH_ROWS.filter((row) => row.rows.some((r) => opts.rows.has(r)));
  if (asked.some((row) => row.service)) buildIfStale();
  const generator = await detectGenerator(opts.generator);
  log(`load generator: ${generator.detail}`);

  const needsStore = [...opts.rows].some((r) => !STORELESS_ROWS.includes(r));
  const needsMainSeed = [...opts.rows].some((r) => !STORELESS_ROWS.includes(r) && !OWN_SEED_ROWS.includes(r));
  const store = await openBenchStore(startedAt, workDir, needsStore);
  const { questions, seedSeconds } = await askQuestions(store.target, workDir, needsStore, needsMainSeed);

  const adminToken = randomBytes(36).toString('base64url');
  const service: BenchContext['service'] = {
    observedWorkers: 0,
    workersFlag: opts.workers === null ? 'not given' : 'passed',
  };
  const results: RowResult[] = [];
  const findings: Findings = {
    memory: null,
    extras: null,
    sdk: null,
    policy: null,
    analytics: null,
    invalidation: null,
    feed: null,
    sdkfeed: null,
    stripefeed: null,
  };
  const ctx: BenchContext = {
    opts,
    startedAt,
    workDir,
    generator,
    store,
    questions,
    adminToken,
    ...starters({ opts, workDir, storeEnv: store.env, adminToken, service }),
    measure: measurer({ opts, generator, workDir, store, results }),
    results,
    findings,
    service,
  };

  for (const row of asked) {
    if (row.postgresOnly && store.serverUrl === null) {
      Object.assign(findings, { [row.postgresOnly.finding]: { skipped: row.postgresOnly.why } });
      continue;
    }
    if (stopping()) continue;
    try {
      await row.run(ctx);
    } catch (err) {
      note(`${row.name} failed: ${(err as Error).message}`);
    }
  }
  summarize(ctx, { needsStore, needsMainSeed, seedSeconds });
}

try {
  await main();
} catch (err) {
  log(`failed: ${(err as Error).stack ?? String(err)}`);
  process.exitCode = 1;
} finally {
  await cleanup();
}

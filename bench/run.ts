/**
 * `npm run bench`: seeds a store, then measures side by side, with one load generator, the
 * same connections and the same duration: a bare node:http baseline, the service (hot,
 * unknown, Zipf, one hot customer, right after a start) and a query-per-request peer; then
 * the read model's memory per subscriber and load time, and the propagation delay across
 * two instances on PostgreSQL. Prints a table and writes bench/results/<ISO time>.json.
 * See bench/README.md.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { Agent, createServer } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { SEMI_SPACE_FLAG } from '../src/runtime/cluster.js';
import { MAX_RATE_LIMIT } from '../src/runtime/config.js';
import type { StoreTarget } from '../src/store/index.js';
import { MAX_TENANTS, RequestFactory, customerId, seededStatus, slugOf } from './data.js';
import type { BenchRequest, Entitlements, Sizes } from './data.js';
import { measureInvalidation } from './invalidation.js';
import type { InvalidationResult } from './invalidation.js';
import { measureFeed } from './feed.js';
import type { FeedResult } from './feed.js';
import { measureSdkFeed } from './sdk-feed.js';
import { measureStripeFeed } from './stripe-feed.js';
import type { StripeFeedResult } from './stripe-feed.js';
import { call } from './http.js';
import { detectGenerator, runLoad, writeLines } from './load.js';
import type { Generator, GeneratorKind } from './load.js';
import {
  StartError,
  cpuSeconds,
  freePort,
  killAllSync,
  rssMb,
  serverProcesses,
  spawnChild,
  stopAll,
  stopChild,
  systemBusySeconds,
  tail,
  waitReady,
} from './procs.js';
import type { Child } from './procs.js';
import {
  feedLine,
  feedTarget,
  invalidationLine,
  memoryLine,
  sdkFeedLine,
  sdkLine,
  sdkTargets,
  stripeFeedLines,
  stripeFeedTarget,
  table,
  targets,
  targetsTable,
} from './report.js';
import type { MemoryResult, RowName, RowResult, SdkResult } from './report.js';
import { backendPids, createDatabase, dropDatabase, inspect, seed } from './seed.js';
import { POLICY_TENANT, dunningSet, policyProgress, seedPolicyTenant, setDunningExtras } from './dunning.js';
import { MIDDLEWARE_BODY, benchCustomer, middlewareCostNs } from './middleware-app.js';
import { analyticsLines, measureAnalytics, seedAnalytics } from './analytics.js';
import type { AnalyticsResult } from './analytics.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'dist', 'src', 'cli', 'main.js');
const ALL_ROWS = [
  'baseline',
  'hot1',
  'writes',
  'hooks',
  'hot',
  'secretkey',
  'unknown',
  'dunning',
  'zipf',
  'hotkey',
  'drip',
  'zipfcold',
  'peer',
  'memory',
  'extras',
  'policy',
  'invalidation',
  'feed',
  'sdk',
  'sdkfeed',
  'stripefeed',
  'middleware',
  'analytics',
] as const;
type Row = (typeof ALL_ROWS)[number];
/** Rows that measure without the seeded store: asked for alone, no store is made. */
const STORELESS_ROWS: readonly Row[] = ['extras', 'sdk', 'middleware'];
/** Rows that seed tenants of their own: asked for alone, a store is made but the main seed is not. */
const OWN_SEED_ROWS: readonly Row[] = ['analytics', 'stripefeed'];

const HOT_COUNT = 10_000;
/** The dripping row: this many connections from one address, each sending a byte a second. */
const DRIP_CONNECTIONS = 1_100;
const DRIP_FROM = '127.0.0.2';
/** The hooks row: status changes a second, each delivered to a receiver on loopback while the lookups are measured. */
const HOOK_CHANGES_PER_S = 50;
const UNKNOWN_COUNT = 10_000;
const ZIPF_S = 1.0;
const INVALIDATION_TRIALS = 100;
const FEED_TRIALS = 100;
/** The stripefeed row: rounds, each of this many customers (a failure, then its payment). */
const STRIPE_FEED_ROUNDS = 3;
const STRIPE_FEED_CUSTOMERS = 20;
/** The analytics row: timed calls of each query, after 2 untimed ones. */
const ANALYTICS_CALLS = 20;
/** The sdk row: non-active subscribers in @dunwall/node's copy. */
const SDK_COUNT = 100_000;
const CHECK_SAMPLE = 50;
/** The middleware row: customers asked, and rounds of each server, alternated (the best of each kept). */
const MIDDLEWARE_CUSTOMERS = 10_000;
const MIDDLEWARE_ROUNDS = 2;
/** How long a process idles after its start before its memory is read. */
const MEMORY_SETTLE_MS = 3_000;

const USAGE = `npm run bench -- [options]

  --quick              100 tenants, 20,000 subscribers, 3 s per row (default: 1,000 / 1,000,000, 10 s)
  --duration S         seconds of measured load per row
  --warmup S           seconds of unmeasured load before each row (default 2, --quick 1)
  --connections N      concurrent connections of the load generator (default 50)
  --workers N          passed to \`dunwall serve --workers N\`
  --rows LIST          a subset of ${ALL_ROWS.join(',')}
  --generator NAME     wrk or autocannon (default: wrk when installed)
  --reuse NAME|DIR     measure a store kept by an earlier --keep run (a database name on
                       DATABASE_URL's server, or an embedded DUNWALL_DATA_DIR); no seed
  --skip-seed          the same as --reuse, which it needs
  --keep               keep the bench database or folder at the end (for --reuse)
  --no-build           do not run \`npm run build\` when dist/ is older than src/

PostgreSQL when DATABASE_URL is set (a fresh database dunwall_bench_<time> is created on that
server and dropped at the end), else the embedded store in a temporary folder.`;

function fail(message: string): never {
  process.stderr.write(`bench: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function positive(raw: string | undefined, name: string, fallback: number): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) fail(`${name} must be a positive number (got ${raw})`);
  return value;
}

function options() {
  let parsed;
  try {
    parsed = parseArgs({
      options: {
        quick: { type: 'boolean' },
        duration: { type: 'string' },
        warmup: { type: 'string' },
        connections: { type: 'string' },
        workers: { type: 'string' },
        rows: { type: 'string' },
        generator: { type: 'string' },
        reuse: { type: 'string' },
        'skip-seed': { type: 'boolean' },
        keep: { type: 'boolean' },
        'no-build': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (err) {
    fail((err as Error).message);
  }
  if (parsed.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const quick = parsed.quick === true;
  const rows = parsed.rows === undefined ? [...ALL_ROWS] : parsed.rows.split(',').map((r) => r.trim());
  for (const r of rows) if (!(ALL_ROWS as readonly string[]).includes(r)) fail(`unknown row ${r}`);
  const generator = parsed.generator;
  if (generator !== undefined && generator !== 'wrk' && generator !== 'autocannon')
    fail('--generator is wrk or autocannon');
  if (parsed['skip-seed'] && parsed.reuse === undefined)
    fail('--skip-seed needs --reuse NAME|DIR: the store to measure');
  const workers = parsed.workers === undefined ? null : Math.round(positive(parsed.workers, '--workers', 1));
  const sizes: Sizes = quick ? { tenants: 100, perTenant: 200 } : { tenants: 1_000, perTenant: 1_000 };
  if (sizes.tenants > MAX_TENANTS) fail('too many tenants');
  return {
    quick,
    sizes,
    durationS: positive(parsed.duration, '--duration', quick ? 3 : 10),
    warmupS: parsed.warmup === '0' ? 0 : positive(parsed.warmup, '--warmup', quick ? 1 : 2),
    connections: Math.round(positive(parsed.connections, '--connections', 50)),
    workers,
    rows: new Set(rows as Row[]),
    generator: generator as GeneratorKind | undefined,
    reuse: parsed.reuse ?? null,
    keep: parsed.keep === true,
    build: parsed['no-build'] !== true,
    zipfLength: quick ? 100_000 : 300_000,
  };
}

const opts = options();
const started = Date.now();
const log = (line: string) =>
  process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}\n`);
const notes: string[] = [];
const note = (line: string) => {
  notes.push(line);
  log(`note: ${line}`);
};

// ---------------------------------------------------------------- cleanup, on every exit path
const cleanups: (() => Promise<void>)[] = [];
let cleaning: Promise<void> | null = null;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await stopAll();
    for (const fn of cleanups.reverse()) await fn().catch((err: unknown) => log(`cleanup: ${(err as Error).message}`));
  })();
  return cleaning;
}
let signalled = false;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    if (signalled) {
      killAllSync();
      process.exit(130);
    }
    signalled = true;
    log(`${signal}: stopping every child process and removing the bench store (again to force)`);
    void cleanup().finally(() => process.exit(130));
  });
}
process.on('exit', killAllSync);

// ---------------------------------------------------------------- helpers
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

function gitCommit(): string | null {
  const head = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' });
  if (head.status !== 0) return null;
  const dirty = spawnSync('git', ['status', '--porcelain', '--', 'src', 'migrations'], { cwd: ROOT, encoding: 'utf8' });
  return `${head.stdout.trim()}${dirty.stdout.trim() ? ' (src/ or migrations/ modified)' : ''}`;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => [k, sortKeys(v)]),
    );
  }
  return value;
}

/** The body the contract requires: top-level keys in its order, flags in any order. */
function sameAnswer(actual: string, expected: string): boolean {
  if (actual === expected) return true;
  try {
    const a = JSON.parse(actual) as Record<string, unknown>;
    const e = JSON.parse(expected) as Record<string, unknown>;
    return (
      Object.keys(a).join() === Object.keys(e).join() && JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(e))
    );
  } catch {
    return false;
  }
}

/** Asks a spread sample of the row's requests, one at a time, and compares each answer. */
async function checkAnswers(baseUrl: string, requests: readonly BenchRequest[]): Promise<RowResult['check']> {
  const step = Math.max(1, Math.floor(requests.length / CHECK_SAMPLE));
  const mismatches: string[] = [];
  let sampled = 0;
  for (let i = 0; i < requests.length && sampled < CHECK_SAMPLE; i += step) {
    const req = requests[i];
    if (!req) break;
    sampled += 1;
    try {
      const res = await fetch(baseUrl + req.path, {
        headers: { authorization: req.authorization },
        signal: AbortSignal.timeout(10_000),
      });
      const body = await res.text();
      if (res.status !== 200 || !sameAnswer(body, req.expected)) {
        mismatches.push(`${req.customerId}: got ${res.status} ${body.slice(0, 200)}; expected ${req.expected}`);
      }
    } catch (err) {
      mismatches.push(`${req.customerId}: ${(err as Error).message}`);
    }
  }
  return { sampled, ok: sampled - mismatches.length, mismatches: mismatches.slice(0, 5) };
}

/**
 * Asks the peer's requests before it is measured, so that it measures a warm buffer cache,
 * whatever the warm-up's rate: every request once, 50 connections sharing the list (2 per
 * worker, each the whole list, when `workers` > 0). Stops after `budgetMs`. Returns how many
 * requests were sent, and how many not answered 200.
 */
async function prime(
  baseUrl: string,
  requests: readonly BenchRequest[],
  workers: number,
  budgetMs: number,
): Promise<{ sent: number; failed: number }> {
  const base = new URL(baseUrl);
  const deadline = Date.now() + budgetMs;
  const lanes = workers > 0 ? 2 * workers : 50;
  let shared = 0;
  let sent = 0;
  let failed = 0;
  const lane = async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    let own = 0;
    try {
      while (Date.now() < deadline && !signalled) {
        const index = workers > 0 ? own++ : shared++;
        const req = requests[index];
        if (!req) break;
        sent += 1;
        const answer = await call(agent, base, 'GET', req.path, { authorization: req.authorization }).catch(() => null);
        if (answer?.status !== 200) failed += 1;
      }
    } finally {
      agent.destroy();
    }
  };
  await Promise.all(Array.from({ length: lanes }, lane));
  return { sent, failed };
}

/**
 * The writes and hooks rows' background: a tenant on a tier with downstream webhooks, with
 * an endpoint on a receiver in this process when `withEndpoint`, and `perSecond` status
 * changes a second through the admin API (each customer flips between warning and active),
 * until `stop`.
 */
/** One secret key (status:read) per tenant, through the admin API: the seed holds none. */
async function createSecretKeys(
  url: string,
  adminToken: string,
  tenants: readonly number[],
): Promise<Map<number, string>> {
  const keys = new Map<number, string>();
  for (const num of tenants) {
    const res = await fetch(`${url}/admin/v1/tenants/${slugOf(num)}/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench', scopes: ['status:read'] }),
      signal: AbortSignal.timeout(10_000),
    });
    if (res.status !== 201) throw new Error(`secret key for ${slugOf(num)}: ${res.status} ${await res.text()}`);
    keys.set(num, ((await res.json()) as { secret_key: string }).secret_key);
  }
  return keys;
}

async function startHookTraffic(
  url: string,
  adminToken: string,
  perSecond: number,
  withEndpoint: boolean,
): Promise<{ stop(): Promise<{ changes: number; failedChanges: number; delivered: number }> }> {
  let delivered = 0;
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      delivered += 1;
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const port = (receiver.address() as AddressInfo).port;
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  const base = new URL(url);
  const headers = { authorization: `Bearer ${adminToken}` };
  const slug = `bench-hooks-${randomBytes(3).toString('hex')}`;
  const created = await call(
    agent,
    base,
    'POST',
    '/admin/v1/tenants',
    headers,
    JSON.stringify({ slug, tier: 'scale' }),
  );
  if (created.status !== 201) throw new Error(`hooks: tenant not created: ${created.status} ${created.body}`);
  if (withEndpoint) {
    const endpoint = await call(
      agent,
      base,
      'POST',
      `/admin/v1/tenants/${slug}/webhook-endpoints`,
      headers,
      JSON.stringify({ url: `http://127.0.0.1:${port}/hooks` }),
    );
    if (endpoint.status !== 201) throw new Error(`hooks: endpoint not created: ${endpoint.status} ${endpoint.body}`);
  }
  let changes = 0;
  let failedChanges = 0;
  let n = 0;
  const timer = setInterval(() => {
    const i = n;
    n += 1;
    const status = Math.floor(i / 100) % 2 === 0 ? 'warning' : 'active';
    call(
      agent,
      base,
      'PUT',
      `/admin/v1/tenants/${slug}/subscribers/cus_hook${i % 100}`,
      headers,
      JSON.stringify({ status }),
    )
      .then((a) => (a.status === 200 ? (changes += 1) : (failedChanges += 1)))
      .catch(() => (failedChanges += 1));
  }, 1000 / perSecond);
  return {
    async stop() {
      clearInterval(timer);
      // The last changes' deliveries: a poll interval and a little more.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      agent.destroy();
      receiver.closeAllConnections();
      await new Promise((resolve) => receiver.close(resolve));
      return { changes, failedChanges, delivered };
    },
  };
}

/**
 * Opens `count` connections to `url` from the local address `from`, each sending the start
 * of a request and then one header byte a second, never finishing; a connection the
 * service closes is opened again (a determined attacker). `ready`: all opened once.
 */
function startDrippers(
  url: URL,
  count: number,
  from: string,
): { ready: Promise<void>; stop(): { opened: number; closedByServer: number; maxOpen: number } } {
  const sockets = new Set<Socket>();
  const seen = { opened: 0, closedByServer: 0, maxOpen: 0 };
  let stopped = false;
  const open = (): Promise<void> =>
    new Promise((resolve) => {
      if (stopped) return resolve();
      const socket = connect({ host: url.hostname, port: Number(url.port), localAddress: from });
      sockets.add(socket);
      seen.opened += 1;
      seen.maxOpen = Math.max(seen.maxOpen, sockets.size);
      socket.on('error', () => {});
      socket.once('connect', () => {
        socket.write(`GET /api/subscriber-status/bench-t0001 HTTP/1.1\r\nHost: ${url.host}\r\nX-Drip: `);
        resolve();
      });
      socket.once('close', () => {
        sockets.delete(socket);
        resolve();
        if (stopped) return;
        seen.closedByServer += 1;
        // Back after a breath, as a loop in an attacker's script would be.
        setTimeout(() => void open(), 1_000).unref();
      });
    });
  const tick = setInterval(() => {
    for (const s of sockets) if (s.writable) s.write('a');
  }, 1_000);
  const ready = (async () => {
    for (let i = 0; i < count; i += 50) await Promise.all(Array.from({ length: Math.min(50, count - i) }, open));
  })();
  return {
    ready,
    stop() {
      stopped = true;
      clearInterval(tick);
      for (const s of sockets) s.destroy();
      return seen;
    },
  };
}

function extrasLine(e: { count: number; payUrlLength: number; bytesPerCustomer: number } | null): string {
  if (e === null) return 'customers in dunning: not run (--rows)';
  return `customers in dunning: ${e.bytesPerCustomer.toFixed(1)} bytes each beside the index, with a ${e.payUrlLength}-character pay link (${e.count.toLocaleString('en-US')} measured; target at most 300)`;
}

function policyLine(
  p:
    | { subscribers: number; gated: number; seconds: number; during: { rps: number; p99Ms: number; non2xx: number } }
    | { skipped: string }
    | null,
): string {
  if (p === null) return 'policy change: not run (--rows)';
  if ('skipped' in p) return `policy change: skipped (${p.skipped})`;
  return (
    `policy change over ${p.subscribers.toLocaleString('en-US')} subscribers (gate to banner_only, ${p.gated.toLocaleString('en-US')} answered again): ${p.seconds.toFixed(1)} s; ` +
    `lookups meanwhile ${Math.round(p.during.rps)} req/s, p99 ${p.during.p99Ms.toFixed(2)} ms, ${p.during.non2xx} non-2xx`
  );
}

// ---------------------------------------------------------------- main
async function main(): Promise<void> {
  const startedAt = new Date(started);
  const workDir = mkdtempSync(join(tmpdir(), 'dunwall-bench-'));
  cleanups.push(async () => {
    if (opts.keep) log(`kept the work folder ${workDir}`);
    else rmSync(workDir, { recursive: true, force: true });
  });

  const wantsService = [
    'hot1',
    'writes',
    'hooks',
    'hot',
    'unknown',
    'dunning',
    'zipf',
    'hotkey',
    'drip',
    'zipfcold',
    'memory',
    'policy',
    'invalidation',
    'feed',
    'sdkfeed',
    'stripefeed',
    'analytics',
  ].some((r) => opts.rows.has(r as Row));
  if (wantsService) buildIfStale();
  const generator: Generator = await detectGenerator(opts.generator);
  log(`load generator: ${generator.detail}`);

  // ---- the store (none when every row asked for measures without one)
  const needsStore = [...opts.rows].some((r) => !STORELESS_ROWS.includes(r));
  const needsMainSeed = [...opts.rows].some((r) => !STORELESS_ROWS.includes(r) && !OWN_SEED_ROWS.includes(r));
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

  // ---- the questions
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

  // ---- the processes
  // The load comes from one address for one tenant: the limits stay on (their cost is part
  // of what is measured) but far above what the load sends.
  // The admin quota too: the secretkey row creates a key per tenant (1,000) before it is measured.
  const BENCH_RATE_LIMITS = {
    DUNWALL_RATE_LIMIT_LOOKUP_PER_IP: String(MAX_RATE_LIMIT),
    DUNWALL_RATE_LIMIT_LOOKUP_PER_TENANT: String(MAX_RATE_LIMIT),
    DUNWALL_RATE_LIMIT_ADMIN_PER_IP: String(MAX_RATE_LIMIT),
  };
  const adminToken = randomBytes(36).toString('base64url');
  const baseEnv = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !/^(DATABASE_URL|DATABASE_READ_URL|DUNWALL_.*|PORT|HOST|LOG_LEVEL|NODE_OPTIONS)$/.test(k),
    ),
  );
  // An object: TypeScript does not follow assignments made inside the functions below.
  const state: { workersFlag: 'not given' | 'passed' | 'rejected' } = {
    workersFlag: opts.workers === null ? 'not given' : 'passed',
  };

  async function startService(
    name: string,
    overrides: { env?: Record<string, string>; workers?: number } = {},
  ): Promise<{ child: Child; url: string }> {
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

  async function startScript(
    name: string,
    script: string,
    env: Record<string, string>,
  ): Promise<{ child: Child; url: string }> {
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

  const results: RowResult[] = [];
  async function measure(
    row: RowName,
    what: string,
    server: { child: Child; url: string },
    requests: readonly BenchRequest[],
    linesFile: string,
  ): Promise<void> {
    // Right after a start: no check, no priming, no warm-up; the load starts at once.
    const cold = row === 'zipfcold';
    const check =
      row === 'baseline' || cold ? { sampled: 0, ok: 0, mismatches: [] } : await checkAnswers(server.url, requests);
    if (check.mismatches.length > 0)
      note(
        `${row}: ${check.sampled - check.ok} of ${check.sampled} sampled answers were wrong, e.g. ${check.mismatches[0]}`,
      );
    // The service holds every subscriber from its start: its rows get their warm-up only,
    // as in life. The peer's questions are asked once before, to warm the database's buffers.
    if (row === 'peer') {
      const primeStarted = performance.now();
      const { workers } = serverProcesses(server.child);
      // The peer caches nothing: priming only warms the database's buffers, so 10 s will do.
      const { sent, failed } = await prime(server.url, requests, workers, 10_000);
      log(
        `${row}: primed with ${sent} requests in ${((performance.now() - primeStarted) / 1000).toFixed(1)} s${failed > 0 ? `, ${failed} not answered 200` : ''}`,
      );
      if (failed > 0) note(`${row}: ${failed} of ${sent} priming requests were not answered 200`);
    }
    const load = { baseUrl: server.url, linesFile, connections: opts.connections, workDir };
    if (opts.warmupS > 0 && !cold) await runLoad(generator, { ...load, durationS: opts.warmupS });
    const procs = serverProcesses(server.child);
    const cpuPids = procs.workers > 0 ? [server.child.pid, ...procs.pids] : procs.pids;
    const loadAverage = loadavg()[0] ?? 0;
    const dbBefore = new Map((await dbPids()).map((pid) => [pid, cpuSeconds([pid])]));
    const cpuBefore = cpuSeconds(cpuPids);
    const busyBefore = systemBusySeconds();
    const result = await runLoad(generator, { ...load, durationS: opts.durationS });
    const cpu = cpuSeconds(cpuPids) - cpuBefore;
    const busy = systemBusySeconds() - busyBefore;
    // A backend that connected during the run did all its work in it.
    const db = (await dbPids()).reduce((sum, pid) => sum + cpuSeconds([pid]) - (dbBefore.get(pid) ?? 0), 0);
    const pct = (seconds: number) => (result.seconds > 0 ? (seconds / result.seconds) * 100 : 0);
    const dbCpuPct = target.engine === 'postgres' ? pct(db) : null;
    // What neither the server, the database nor the generator used: other work on the machine skews the row.
    const otherCpuPct = Math.max(0, pct(busy) - pct(cpu) - (dbCpuPct ?? 0) - (result.generatorCpuPct ?? 0));
    if (otherCpuPct > 25)
      note(
        `${row}: other processes used ${Math.round(otherCpuPct)}% of a core during the run (load average ${loadAverage.toFixed(1)} before it): the machine was busy`,
      );
    const rss = procs.pids.reduce((sum, pid) => sum + rssMb(pid), 0);
    if (server.child.hasExited())
      note(`${row}: ${server.child.name} exited during the run:\n${tail(server.child.logPath)}`);
    results.push({
      row,
      what,
      load: result,
      rssMb: rss,
      rssNote:
        procs.workers > 0
          ? `sum of ${procs.workers} workers (the primary, not counted: ${rssMb(server.child.pid).toFixed(1)} MB)`
          : 'one process',
      primaryRssMb: procs.workers > 0 ? rssMb(server.child.pid) : null,
      workers: procs.workers,
      serverCpuPct: pct(cpu),
      dbCpuPct,
      otherCpuPct,
      loadAverage,
      check,
      vsBaseline: null,
      vsPeer: null,
    });
    log(
      `${row}: ${Math.round(result.rps)} req/s, p50 ${result.p50Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms, RSS ${rss.toFixed(1)} MB, ` +
        `${result.non2xx} non-2xx, ${result.socketErrors} socket errors`,
    );
  }

  async function phase(name: string, fn: () => Promise<void>): Promise<void> {
    if (signalled) return;
    try {
      await fn();
    } catch (err) {
      note(`${name} failed: ${(err as Error).message}`);
    }
  }

  const fmtN = (n: number) => n.toLocaleString('en-US');
  if (opts.rows.has('baseline')) {
    await phase('baseline', async () => {
      const server = await startScript('baseline', 'baseline.ts', { BENCH_BODY: baselineBody });
      try {
        await measure(
          'baseline',
          `node:http, fixed ${Buffer.byteLength(baselineBody)}-byte JSON body`,
          server,
          hot,
          files.hot,
        );
      } finally {
        await stopChild(server.child);
      }
    });
  }

  if (opts.rows.has('middleware')) {
    await phase('middleware', async () => {
      // The same Express route without and with dunwallExpress (an in-memory copy, no
      // network), each in a process of its own, measured in turn: the best round of each is
      // kept, so that a moment of other work on the machine does not decide the ratio.
      const requests: BenchRequest[] = Array.from({ length: MIDDLEWARE_CUSTOMERS }, (_, i) => {
        const customerId = benchCustomer(i + 1);
        return {
          path: '/api/projects',
          authorization: `Bearer ${customerId}`,
          expected: MIDDLEWARE_BODY,
          tenant: 0,
          customerId,
        };
      });
      const file = join(workDir, 'middleware.txt');
      writeLines(file, requests);
      const env = { BENCH_CUSTOMERS: String(MIDDLEWARE_CUSTOMERS) };
      const bare = await startScript('express', 'middleware-app.ts', { ...env, BENCH_MIDDLEWARE: 'off' });
      try {
        const guarded = await startScript('middleware', 'middleware-app.ts', { ...env, BENCH_MIDDLEWARE: 'on' });
        try {
          const best = new Map<RowName, RowResult>();
          const ratios: string[] = [];
          for (let round = 1; round <= MIDDLEWARE_ROUNDS && !signalled; round += 1) {
            const rps: number[] = [];
            for (const [row, server, what] of [
              ['express', bare, 'Express 5, one JSON route'],
              [
                'middleware',
                guarded,
                `the same behind dunwallExpress, ${fmtN(MIDDLEWARE_CUSTOMERS)} customers (1 in 10 warning, held), in-memory copy`,
              ],
            ] as const) {
              await measure(row, what, server, requests, file);
              const result = results.pop();
              if (result === undefined) continue;
              rps.push(result.load.rps);
              if ((best.get(row)?.load.rps ?? -1) < result.load.rps) best.set(row, result);
            }
            if (rps.length === 2) ratios.push(((rps[1] ?? 0) / (rps[0] || 1)).toFixed(3));
          }
          for (const row of ['express', 'middleware'] as const) {
            const result = best.get(row);
            if (result) results.push(result);
          }
          const bareRow = best.get('express');
          const guardedRow = best.get('middleware');
          if (bareRow && guardedRow) {
            // The server's CPU per request as well: steadier than the rate when the load
            // generator, not the server, is what runs out of CPU.
            const cpuUs = (r: RowResult) => (r.load.rps > 0 ? ((r.serverCpuPct / 100) * 1e6) / r.load.rps : NaN);
            // And the middleware alone, called in this process: its cost against the bare route's CPU per request.
            const ownNs = middlewareCostNs(MIDDLEWARE_CUSTOMERS);
            note(
              `middleware: ${(guardedRow.load.rps / bareRow.load.rps).toFixed(3)} of the bare route's rate, best of ${MIDDLEWARE_ROUNDS} rounds each ` +
                `(round by round: ${ratios.join(', ')}); overhead ${((1 - guardedRow.load.rps / bareRow.load.rps) * 100).toFixed(1)}% (target < 5%); ` +
                `server CPU per request ${cpuUs(bareRow).toFixed(1)} us bare, ${cpuUs(guardedRow).toFixed(1)} us behind the middleware; ` +
                `the middleware alone, in process: ${ownNs.toFixed(0)} ns a request, ${((ownNs / 1000 / cpuUs(bareRow)) * 100).toFixed(2)}% of the bare route's CPU per request`,
            );
          }
        } finally {
          await stopChild(guarded.child);
        }
      } finally {
        await stopChild(bare.child);
      }
    });
  }

  if (['hot1', 'writes', 'hooks'].some((r) => opts.rows.has(r as Row))) {
    await phase('hot1', async () => {
      // One process, as the baseline and the peer are: the figures compare like with like.
      // Downstream webhooks may go to loopback, for the hooks row's receiver.
      // The writes and hooks rows' status changes go through the admin API, unlimited here.
      const hooksEnv = {
        DUNWALL_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true',
        DUNWALL_WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
        DUNWALL_RATE_LIMIT_ADMIN_PER_IP: '0',
      };
      const server = await startService('service-1', { workers: 1, env: hooksEnv });
      try {
        if (opts.rows.has('hot1'))
          await measure(
            'hot1',
            `service, one process, ${fmtN(hot.length)} known subscribers, hmac`,
            server,
            hot,
            files.hot,
          );
        // The same lookups while the process also applies status changes (writes), and while
        // it also sends each to a tenant's endpoint (hooks): hooks / writes is the deliverer's
        // cost to the lookup, writes / hot1 the cost of the changes themselves.
        for (const row of ['writes', 'hooks'] as const) {
          if (!opts.rows.has(row)) continue;
          const traffic = await startHookTraffic(server.url, adminToken, HOOK_CHANGES_PER_S, row === 'hooks');
          try {
            const what =
              row === 'hooks' ? 'status changes/s, each sent as a webhook' : 'status changes/s, no webhook endpoint';
            await measure(
              row,
              `service, one process, hot list, while ${HOOK_CHANGES_PER_S} ${what}`,
              server,
              hot,
              files.hot,
            );
          } finally {
            const seen = await traffic.stop();
            note(
              `${row}: ${fmtN(seen.changes)} status changes made (${fmtN(seen.failedChanges)} failed), ${fmtN(seen.delivered)} webhooks received`,
            );
          }
        }
      } finally {
        await stopChild(server.child);
      }
    });
  }

  let observedWorkers = 0;
  if (['hot', 'secretkey', 'unknown', 'zipf', 'hotkey', 'drip'].some((r) => opts.rows.has(r as Row))) {
    await phase('service', async () => {
      const server = await startService('service');
      try {
        if (opts.rows.has('hot'))
          await measure('hot', `service, ${fmtN(hot.length)} known subscribers, hmac`, server, hot, files.hot);
        if (opts.rows.has('secretkey')) {
          // The same questions from a tenant's server: a secret key of each tenant instead of
          // its publishable key and hmac (the key stands in for both).
          const secretKeys = await createSecretKeys(server.url, adminToken, [...new Set(hot.map((r) => r.tenant))]);
          const keyed = hot.map((r) => ({
            ...r,
            path: r.path.replace(/&hmac=[^&]*/, ''),
            authorization: `Bearer ${secretKeys.get(r.tenant) ?? ''}`,
          }));
          const keyedFile = join(workDir, 'secretkey.txt');
          writeLines(keyedFile, keyed);
          await measure(
            'secretkey',
            `service, the hot list with each tenant's secret key, no hmac`,
            server,
            keyed,
            keyedFile,
          );
          const hotRow = results.find((r) => r.row === 'hot');
          const row = results.find((r) => r.row === 'secretkey');
          if (hotRow && row)
            note(
              `secretkey: ${(row.load.rps / hotRow.load.rps).toFixed(2)} of the hot row's rate (publishable key and hmac; target at least 0.9)`,
            );
        }
        if (opts.rows.has('unknown'))
          await measure(
            'unknown',
            `service, ${fmtN(unknown.length)} unknown customers, hmac`,
            server,
            unknown,
            files.unknown,
          );
        if (opts.rows.has('zipf')) {
          await measure(
            'zipf',
            `service, Zipf s=${ZIPF_S} over ${fmtN(total)} (${fmtN(zipf.distinct)} distinct)`,
            server,
            zipf.requests,
            files.zipf,
          );
        }
        if (opts.rows.has('hotkey'))
          await measure('hotkey', 'service, one hot customer, hmac', server, hotkey, files.hotkey);
        if (opts.rows.has('drip')) {
          // A slow-loris host: many connections from one address, each dripping a byte a
          // second and reopened when closed; the load generator, from another address, is
          // everyone else.
          const drip = startDrippers(new URL(server.url), DRIP_CONNECTIONS, DRIP_FROM);
          try {
            await drip.ready;
            await measure(
              'drip',
              `service, hot list, while ${fmtN(DRIP_CONNECTIONS)} connections from ${DRIP_FROM} drip a byte a second`,
              server,
              hot,
              files.hot,
            );
          } finally {
            const seen = drip.stop();
            note(
              `drip: ${fmtN(seen.opened)} dripping connections opened, ${fmtN(seen.closedByServer)} closed by the service, at most ${fmtN(seen.maxOpen)} open at once`,
            );
          }
        }
        observedWorkers = serverProcesses(server.child).workers;
      } finally {
        await stopChild(server.child);
      }
    });
  }

  if (opts.rows.has('dunning')) {
    await phase('dunning', async () => {
      // Customers in dunning whose answers carry a scheduled lockout and a pay link, built per
      // request: given to them in the store for this row only (no service runs meanwhile), then
      // taken away again, so that every other row measures the seed as it is.
      const set = dunningSet(factory, tiers, HOT_COUNT, new Set(hot.map((r) => r.customerId)), Date.now());
      const dunningFile = join(workDir, 'dunning.txt');
      writeLines(dunningFile, set.requests);
      await setDunningExtras(target, set.requests, set);
      try {
        const server = await startService('service-dunning');
        try {
          await measure(
            'dunning',
            `service, ${fmtN(set.requests.length)} warning and lockout subscribers with lockout_at and pay_url, hmac`,
            server,
            set.requests,
            dunningFile,
          );
        } finally {
          await stopChild(server.child);
        }
      } finally {
        await setDunningExtras(target, set.requests, null);
      }
      const hotRow = results.find((r) => r.row === 'hot');
      const row = results.find((r) => r.row === 'dunning');
      if (hotRow && row)
        note(
          `dunning: ${(row.load.rps / hotRow.load.rps).toFixed(2)} of the hot row's rate (answers with lockout_at and pay_url; target at least 0.9)`,
        );
    });
  }

  if (opts.rows.has('zipfcold')) {
    await phase('zipfcold', async () => {
      // A fresh process, measured from the moment it says it is ready: what a deploy or a
      // restart costs the first users.
      const server = await startService('service-cold');
      try {
        await measure(
          'zipfcold',
          `service, Zipf mix in the first ${opts.durationS} s after a start`,
          server,
          zipf.requests,
          files.zipf,
        );
      } finally {
        await stopChild(server.child);
      }
    });
  }

  if (opts.rows.has('peer')) {
    await phase('peer', async () => {
      // Embedded: the service has stopped, so the peer may open the folder.
      const server = await startScript('peer', 'peer.ts', peerEnv);
      try {
        await measure(
          'peer',
          `peer: node:http + ${serverUrl ? 'pg' : 'PGlite'}, 1 query/request, hot set`,
          server,
          hot,
          files.hot,
        );
      } finally {
        await stopChild(server.child);
      }
    });
  }

  let memory: MemoryResult | null = null;
  if (opts.rows.has('memory')) {
    await phase('memory', async () => {
      // One process on an empty store, then one on the seeded store, each measured once
      // loaded and idle: the difference is what the read model costs.
      let emptyEnv: Record<string, string>;
      if (serverUrl !== null) {
        const emptyName = `dunwall_bench_empty_${startedAt.toISOString().replace(/\D/g, '').slice(0, 17)}`;
        emptyEnv = { DATABASE_URL: await createDatabase(serverUrl, emptyName) };
        cleanups.push(() => dropDatabase(serverUrl, emptyName));
      } else {
        const emptyDir = join(workDir, 'empty');
        mkdirSync(emptyDir, { recursive: true, mode: 0o700 });
        emptyEnv = { DUNWALL_DATA_DIR: emptyDir, DUNWALL_DEMO: '0' };
      }
      const settled = async (name: string, env: Record<string, string>) => {
        const started = performance.now();
        const server = await startService(name, { env, workers: 1 });
        const readyS = (performance.now() - started) / 1000;
        try {
          await new Promise((resolve) => setTimeout(resolve, MEMORY_SETTLE_MS));
          const text = await (await fetch(`${server.url}/metrics`)).text();
          const metric = (m: string) => Number(new RegExp(`^${m} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
          return {
            rssMb: rssMb(server.child.pid),
            readyS,
            loadS: metric('dunwall_readmodel_last_load_seconds'),
            indexBytes: metric('dunwall_readmodel_index_bytes'),
            subscribers: metric('dunwall_readmodel_subscribers'),
          };
        } finally {
          await stopChild(server.child);
        }
      };
      const empty = await settled('memory-empty', emptyEnv);
      const full = await settled('memory-full', {});
      memory = {
        subscribers: full.subscribers,
        emptyRssMb: empty.rssMb,
        fullRssMb: full.rssMb,
        bytesPerSubscriber: full.subscribers > 0 ? ((full.rssMb - empty.rssMb) * 2 ** 20) / full.subscribers : null,
        indexBytesPerSubscriber: full.subscribers > 0 ? full.indexBytes / full.subscribers : null,
        loadSeconds: full.loadS,
        readySeconds: full.readyS,
      };
      log(memoryLine(memory));
    });
  }

  let extras: { count: number; payUrlLength: number; bytesPerCustomer: number } | null = null;
  if (opts.rows.has('extras')) {
    await phase('extras', async () => {
      // In a process of its own, with collections it can force: what one customer in dunning adds.
      const res = spawnSync(
        process.execPath,
        ['--expose-gc', '--import', 'tsx', join(ROOT, 'bench', 'extras-memory.ts')],
        {
          cwd: ROOT,
          encoding: 'utf8',
          timeout: 300_000,
        },
      );
      if (res.status !== 0) throw new Error(`extras-memory.ts: ${res.stderr.trim().split('\n').slice(-3).join(' ')}`);
      extras = JSON.parse(res.stdout.trim()) as { count: number; payUrlLength: number; bytesPerCustomer: number };
      log(
        `extras: ${fmtN(extras.count)} customers in dunning, ${extras.bytesPerCustomer.toFixed(1)} bytes each with a ${extras.payUrlLength}-character pay link (target at most 300)`,
      );
    });
  }

  let sdk: SdkResult | null = null;
  if (opts.rows.has('sdk')) {
    await phase('sdk', async () => {
      // Each mix in a process of its own, with collections it can force.
      const run = (mix: 'plain' | 'dunning') => {
        const res = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', join(ROOT, 'bench', 'sdk.ts')], {
          cwd: ROOT,
          encoding: 'utf8',
          timeout: 300_000,
          env: { ...process.env, BENCH_SDK_MIX: mix, BENCH_SDK_COUNT: String(SDK_COUNT) },
        });
        if (res.status !== 0) throw new Error(`sdk.ts (${mix}): ${res.stderr.trim().split('\n').slice(-3).join(' ')}`);
        return JSON.parse(res.stdout.trim()) as SdkResult['plain'] & { payUrlLength?: number; payUrlBytes?: number };
      };
      const plain = run('plain');
      const dunning = run('dunning');
      sdk = {
        count: SDK_COUNT,
        payUrlLength: dunning.payUrlLength ?? 0,
        payUrlBytes: dunning.payUrlBytes ?? 0,
        plain,
        dunning,
      };
      log(sdkLine(sdk));
    });
  }

  let policy:
    { subscribers: number; gated: number; seconds: number; during: RowResult['load'] } | { skipped: string } | null =
    null;
  if (opts.rows.has('policy')) {
    if (serverUrl === null) {
      policy = {
        skipped: 'embedded store: the million-subscriber policy change is measured on PostgreSQL (DATABASE_URL)',
      };
    } else {
      await phase('policy', async () => {
        // A tenant of a million subscribers goes from gate to banner_only while the hot list is
        // asked: how long until every one of its gated customers is answered and recorded again,
        // and what the lookups got meanwhile.
        const seeded = await seedPolicyTenant(target);
        log(`policy: tenant ${POLICY_TENANT}, ${fmtN(seeded.subscribers)} subscribers, ${fmtN(seeded.gated)} gated`);
        const server = await startService('service-policy');
        try {
          const durationS = Math.max(opts.durationS, 30);
          const load = runLoad(generator, {
            baseUrl: server.url,
            linesFile: files.hot,
            connections: opts.connections,
            workDir,
            durationS,
          });
          await new Promise((resolve) => setTimeout(resolve, 1_000));
          const startedMs = performance.now();
          const patched = await fetch(`${server.url}/admin/v1/tenants/${POLICY_TENANT}`, {
            method: 'PATCH',
            headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
            body: JSON.stringify({ policy: { enforcement: 'banner_only' } }),
          });
          if (patched.status !== 200) throw new Error(`policy: PATCH answered ${patched.status}`);
          let progress = await policyProgress(target);
          while ((progress.sweeping || progress.lockout > 0) && performance.now() - startedMs < 900_000 && !signalled) {
            await new Promise((resolve) => setTimeout(resolve, 250));
            progress = await policyProgress(target);
          }
          const seconds = (performance.now() - startedMs) / 1000;
          if (progress.lockout > 0)
            note(`policy: ${fmtN(progress.lockout)} subscribers still recorded lockout after ${seconds.toFixed(0)} s`);
          const during = await load;
          policy = { subscribers: seeded.subscribers, gated: seeded.gated, seconds, during };
          log(
            `policy: ${fmtN(seeded.gated)} of ${fmtN(seeded.subscribers)} subscribers answered and recorded again in ${seconds.toFixed(1)} s; lookups meanwhile ${Math.round(during.rps)} req/s, p99 ${during.p99Ms.toFixed(2)} ms, ${during.non2xx} non-2xx`,
          );
        } finally {
          await stopChild(server.child);
        }
      });
    }
  }

  let analytics: AnalyticsResult | { skipped: string } | null = null;
  if (opts.rows.has('analytics')) {
    if (serverUrl === null) {
      analytics = {
        skipped: 'embedded store: the million-subscriber analytics are measured on PostgreSQL (DATABASE_URL)',
      };
    } else {
      await phase('analytics', async () => {
        // A tenant of a million subscribers with a year of runs, beside smaller tenants in the
        // same tables; its analytics asked through the admin API, one call at a time.
        const seeded = await seedAnalytics(target, (l) => log(`analytics seed: ${l}`));
        const server = await startService('service-analytics');
        try {
          const result = await measureAnalytics({ url: server.url, adminToken, seed: seeded, calls: ANALYTICS_CALLS });
          analytics = result;
          for (const f of result.failures) note(`analytics: ${f}`);
          for (const line of analyticsLines(result)) log(line);
        } finally {
          await stopChild(server.child);
        }
      });
    }
  }

  let invalidation: InvalidationResult | { skipped: string } | null = null;
  if (opts.rows.has('invalidation')) {
    if (serverUrl === null) {
      invalidation = { skipped: 'embedded store: one process owns it, so there is no second instance' };
    } else {
      await phase('invalidation', async () => {
        const a = await startService('instance-a');
        try {
          const b = await startService('instance-b');
          try {
            log(`invalidation: ${INVALIDATION_TRIALS} changes through ${a.url}, polled on ${b.url}`);
            invalidation = await measureInvalidation({
              a: a.url,
              b: b.url,
              adminToken,
              subjects: factory.hot(INVALIDATION_TRIALS, 7),
              slugOf,
              trials: INVALIDATION_TRIALS,
              connections: Math.max(1, 2 * serverProcesses(b.child).workers),
              log,
            });
            for (const e of invalidation.errors.slice(0, 3)) note(`invalidation: ${e}`);
          } finally {
            await stopChild(b.child);
          }
        } finally {
          await stopChild(a.child);
        }
      });
    }
  }

  let feed: FeedResult | { skipped: string } | null = null;
  if (opts.rows.has('feed')) {
    if (serverUrl === null) {
      feed = { skipped: 'embedded store: one process owns it, so there is no second instance' };
    } else {
      await phase('feed', async () => {
        // A: the service, written through its admin API. B: a second service on the same
        // database, a tenant's long poll held on it with the tenant's secret key.
        const a = await startService('feed-a');
        try {
          const b = await startService('feed-b');
          try {
            log(`feed: ${FEED_TRIALS} changes through ${a.url}, each awaited by a long poll on ${b.url}`);
            feed = await measureFeed({
              a: a.url,
              b: b.url,
              adminToken,
              subjects: factory.hot(FEED_TRIALS, 11),
              slugOf,
              trials: FEED_TRIALS,
              log,
            });
            for (const e of feed.errors.slice(0, 3)) note(`feed: ${e}`);
            log(feedLine(feed));
          } finally {
            await stopChild(b.child);
          }
        } finally {
          await stopChild(a.child);
        }
      });
    }
  }

  let sdkfeed: FeedResult | { skipped: string } | null = null;
  if (opts.rows.has('sdkfeed')) {
    if (serverUrl === null) {
      sdkfeed = { skipped: 'embedded store: one process owns it, so there is no second instance' };
    } else {
      await phase('sdkfeed', async () => {
        // A and B: the service twice on one database; @dunwall/node in this process follows B
        // with a secret key of the first tenant, whose subscribers are changed through A.
        const a = await startService('sdkfeed-a');
        try {
          const b = await startService('sdkfeed-b');
          try {
            const subjects = Array.from({ length: Math.min(FEED_TRIALS, sizes.perTenant) }, (_, i) => ({
              customerId: customerId(1, i + 1),
              status: seededStatus(i + 1),
            }));
            log(`sdkfeed: ${FEED_TRIALS} changes through ${a.url}, each awaited in a copy following ${b.url}`);
            sdkfeed = await measureSdkFeed({
              a: a.url,
              b: b.url,
              adminToken,
              slug: slugOf(1),
              subjects,
              trials: FEED_TRIALS,
              log,
            });
            for (const e of sdkfeed.errors.slice(0, 3)) note(`sdkfeed: ${e}`);
            log(sdkFeedLine(sdkfeed));
          } finally {
            await stopChild(b.child);
          }
        } finally {
          await stopChild(a.child);
        }
      });
    }
  }

  let stripefeed: StripeFeedResult[] | { skipped: string } | null = null;
  if (opts.rows.has('stripefeed')) {
    if (serverUrl === null) {
      stripefeed = { skipped: 'embedded store: one process owns it, so there is no second instance' };
    } else {
      await phase('stripefeed', async () => {
        // A database of its own, as a new deployment has it: migrated by the service's first
        // start, never analyzed (the main store is VACUUM ANALYZEd after its seed, which hid
        // the cost of the feed's read on a fresh database).
        const name = `dunwall_bench_stripe_${startedAt.toISOString().replace(/\D/g, '').slice(0, 17)}`;
        const env = { DATABASE_URL: await createDatabase(serverUrl, name) };
        cleanups.push(() => dropDatabase(serverUrl, name));
        const a = await startService('stripefeed-a', { env });
        try {
          const b = await startService('stripefeed-b', { env });
          try {
            const slug = 'bench-stripe';
            const made = await call(
              new Agent(),
              new URL(a.url),
              'POST',
              '/admin/v1/tenants',
              { authorization: `Bearer ${adminToken}` },
              JSON.stringify({ slug }),
            );
            if (made.status !== 201)
              throw new Error(`stripefeed: tenant not created: ${made.status} ${made.body.slice(0, 200)}`);
            const rounds: StripeFeedResult[] = [];
            for (let r = 0; r < STRIPE_FEED_ROUNDS; r += 1) {
              log(
                `stripefeed: round ${r + 1}/${STRIPE_FEED_ROUNDS}, ${STRIPE_FEED_CUSTOMERS} customers through ${a.url}, each awaited in a copy following ${b.url}`,
              );
              const round = await measureStripeFeed({
                a: a.url,
                b: b.url,
                adminToken,
                slug,
                trials: STRIPE_FEED_CUSTOMERS,
                log,
              });
              for (const e of round.errors.slice(0, 3)) note(`stripefeed: ${e}`);
              rounds.push(round);
            }
            stripefeed = rounds;
            for (const line of stripeFeedLines(rounds)) log(line);
          } finally {
            await stopChild(b.child);
          }
        } finally {
          await stopChild(a.child);
        }
      });
    }
  }

  // ---- ratios, table, JSON
  const baseline = results.find((r) => r.row === 'baseline');
  const peer = results.find((r) => r.row === 'peer');
  for (const r of results) {
    r.vsBaseline = baseline ? r.load.rps / baseline.load.rps : null;
    r.vsPeer =
      peer && ['hot1', 'hot', 'unknown', 'zipf', 'hotkey', 'drip', 'zipfcold'].includes(r.row)
        ? r.load.rps / peer.load.rps
        : null;
  }
  if (opts.quick && needsStore)
    note(`--quick: ${fmtN(total)} subscribers and ${opts.durationS} s rows; the targets assume 1,000,000 and 10 s`);
  if (state.workersFlag === 'not given' && observedWorkers > 0) note(`serve ran ${observedWorkers} workers by default`);

  const model = cpus()[0]?.model ?? 'unknown CPU';
  const service =
    state.workersFlag === 'passed'
      ? `serve --workers ${opts.workers}`
      : state.workersFlag === 'rejected'
        ? `serve (--workers ${opts.workers} rejected by serve: one process)`
        : 'serve';
  const header = [
    `Dunwall bench, ${startedAt.toISOString()}${opts.quick ? ' (--quick)' : ''}`,
    needsStore && !needsMainSeed
      ? `store: ${storeLabel}; no main seed (the rows asked for seed their own tenants)`
      : needsStore
        ? `store: ${storeLabel}; ${fmtN(sizes.tenants)} tenants, ${fmtN(total)} subscribers${seedSeconds === null ? ' (reused)' : `, seeded in ${seedSeconds.toFixed(1)} s`}`
        : `store: ${storeLabel}`,
    `load generator: ${generator.detail}; ${opts.connections} connections, ${opts.durationS} s per row after ${opts.warmupS} s of warm-up`,
    `service: node dist/src/cli/main.js ${service}${observedWorkers > 0 ? `, ${observedWorkers} workers (* RSS is their sum)` : ''}`,
    `machine: ${cpus().length} cores (${model}), ${(totalmem() / 2 ** 30).toFixed(0)} GB, Node ${process.version}; server and load generator share it`,
  ];
  const targetList = [
    ...targets(results, invalidation, memory),
    feedTarget(feed),
    ...sdkTargets(sdk, sdkfeed),
    stripeFeedTarget(stripefeed),
  ];
  const output = [
    ...header,
    '',
    table(results),
    '',
    memory ? memoryLine(memory) : 'read model memory: not run (--rows)',
    extrasLine(extras),
    policyLine(policy),
    ...analyticsLines(analytics),
    invalidation ? invalidationLine(invalidation) : 'propagation: not run (--rows)',
    feed ? feedLine(feed) : 'status feed across instances: not run (--rows)',
    sdk ? sdkLine(sdk) : '@dunwall/node copy: not run (--rows)',
    sdkfeed ? sdkFeedLine(sdkfeed) : '@dunwall/node across instances: not run (--rows)',
    ...(stripefeed
      ? stripeFeedLines(stripefeed)
      : ['Stripe events to @dunwall/node across instances: not run (--rows)']),
    '',
    'targets (issues 5, 11 and 12):',
    targetsTable(targetList),
    ...(notes.length > 0 ? ['', 'notes:', ...notes.map((n) => `- ${n}`)] : []),
  ].join('\n');
  process.stdout.write(`\n${output}\n`);

  const resultsDir = join(ROOT, 'bench', 'results');
  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, `${startedAt.toISOString().replace(/:/g, '-')}.json`);
  const json = {
    started_at: startedAt.toISOString(),
    finished_at: new Date().toISOString(),
    quick: opts.quick,
    commit: gitCommit(),
    store: {
      engine: target.engine,
      label: storeLabel,
      tenants: sizes.tenants,
      subscribers: total,
      seed_seconds: seedSeconds,
    },
    generator,
    connections: opts.connections,
    duration_s: opts.durationS,
    warmup_s: opts.warmupS,
    workers: { requested: opts.workers, flag: state.workersFlag, observed: observedWorkers },
    machine: { cores: cpus().length, model, mem_gb: Math.round(totalmem() / 2 ** 30), node: process.version },
    baseline_body_bytes: Buffer.byteLength(baselineBody),
    zipf: { s: ZIPF_S, requests: zipf.requests.length, distinct: zipf.distinct },
    rows: results,
    memory,
    extras,
    policy,
    analytics,
    invalidation,
    feed,
    sdk,
    sdkfeed,
    stripefeed,
    targets: targetList,
    notes,
    table: output,
  };
  writeFileSync(file, `${JSON.stringify(json, null, 2)}\n`);
  log(`wrote ${file}`);
}

try {
  await main();
} catch (err) {
  log(`failed: ${(err as Error).stack ?? String(err)}`);
  process.exitCode = 1;
} finally {
  await cleanup();
}

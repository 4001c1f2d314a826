/** The bench's command line: its flags, and the rows it can run (`--rows`). */
import { parseArgs } from 'node:util';
import { MAX_TENANTS } from './data.js';
import type { Sizes } from './data.js';
import type { GeneratorKind } from './load.js';

export const ALL_ROWS = [
  'baseline',
  'hot1',
  'writes',
  'hooks',
  'hot',
  'secretkey',
  'unknown',
  'dunning',
  'dunninglinks',
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
export type Row = (typeof ALL_ROWS)[number];
/** Rows that measure without the seeded store: asked for alone, no store is made. */
export const STORELESS_ROWS: readonly Row[] = ['extras', 'sdk', 'middleware'];
/** Rows that seed tenants of their own: asked for alone, a store is made but the main seed is not. */
export const OWN_SEED_ROWS: readonly Row[] = ['analytics', 'stripefeed'];

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

export function parseOptions() {
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

export type BenchOptions = ReturnType<typeof parseOptions>;

/** The end of a run: each row against the baseline and the peer, the table and targets printed, the JSON written. */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import type { BenchContext, ExtrasResult, PolicyResult, Skipped } from './context.js';
import { fmtN } from './context.js';
import { log, note, notes } from './lifecycle.js';
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
import { analyticsLines } from './analytics.js';
import { ZIPF_S } from './rows/lookup.js';
import { ROOT } from './services.js';

function gitCommit(): string | null {
  const head = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' });
  if (head.status !== 0) return null;
  const dirty = spawnSync('git', ['status', '--porcelain', '--', 'src', 'migrations'], { cwd: ROOT, encoding: 'utf8' });
  return `${head.stdout.trim()}${dirty.stdout.trim() ? ' (src/ or migrations/ modified)' : ''}`;
}

function extrasLine(e: ExtrasResult | null): string {
  if (e === null) return 'customers in dunning: not run (--rows)';
  return `customers in dunning: ${e.bytesPerCustomer.toFixed(1)} bytes each beside the index, with a ${e.payUrlLength}-character pay link (${e.count.toLocaleString('en-US')} measured; target at most 300)`;
}

function policyLine(p: PolicyResult | Skipped | null): string {
  if (p === null) return 'policy change: not run (--rows)';
  if ('skipped' in p) return `policy change: skipped (${p.skipped})`;
  return (
    `policy change over ${p.subscribers.toLocaleString('en-US')} subscribers (gate to banner_only, ${p.gated.toLocaleString('en-US')} answered again): ${p.seconds.toFixed(1)} s; ` +
    `lookups meanwhile ${Math.round(p.during.rps)} req/s, p99 ${p.during.p99Ms.toFixed(2)} ms, ${p.during.non2xx} non-2xx`
  );
}

/** How the store was made, for the header and the JSON. */
export interface StoreMade {
  needsStore: boolean;
  needsMainSeed: boolean;
  seedSeconds: number | null;
}

/** Each row against the baseline's rate, and the lookup rows against the peer's. */
function compare(results: BenchContext['results']): void {
  const baseline = results.find((r) => r.row === 'baseline');
  const peer = results.find((r) => r.row === 'peer');
  for (const r of results) {
    r.vsBaseline = baseline ? r.load.rps / baseline.load.rps : null;
    r.vsPeer =
      peer && ['hot1', 'hot', 'unknown', 'zipf', 'hotkey', 'drip', 'zipfcold'].includes(r.row)
        ? r.load.rps / peer.load.rps
        : null;
  }
}

/** When, on what store and seed, with which generator, service and machine. */
function headerLines(ctx: BenchContext, made: StoreMade): string[] {
  const { opts, startedAt, generator } = ctx;
  const { needsStore, needsMainSeed, seedSeconds } = made;
  const { sizes, total } = ctx.questions;
  const { label: storeLabel } = ctx.store;
  const state = ctx.service;
  const observedWorkers = state.observedWorkers;
  const model = cpus()[0]?.model ?? 'unknown CPU';
  const service =
    state.workersFlag === 'passed'
      ? `serve --workers ${opts.workers}`
      : state.workersFlag === 'rejected'
        ? `serve (--workers ${opts.workers} rejected by serve: one process)`
        : 'serve';
  return [
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
}

/** The printed summary: the header, the table, each finding's line, the targets and the notes. */
function summaryText(ctx: BenchContext, made: StoreMade, targetList: ReturnType<typeof targets>): string {
  const { results } = ctx;
  const { memory, extras, sdk, policy, analytics, invalidation, feed, sdkfeed, stripefeed } = ctx.findings;
  return [
    ...headerLines(ctx, made),
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
}

/** bench/results/<ISO time>.json: everything measured, and the printed summary. */
function writeResults(
  ctx: BenchContext,
  made: StoreMade,
  targetList: ReturnType<typeof targets>,
  output: string,
): void {
  const { opts, startedAt, generator, results } = ctx;
  const { seedSeconds } = made;
  const { sizes, total, zipf, baselineBody } = ctx.questions;
  const { target, label: storeLabel } = ctx.store;
  const { memory, extras, sdk, policy, analytics, invalidation, feed, sdkfeed, stripefeed } = ctx.findings;
  const state = ctx.service;
  const observedWorkers = state.observedWorkers;
  const model = cpus()[0]?.model ?? 'unknown CPU';
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

export function summarize(ctx: BenchContext, made: StoreMade): void {
  const { opts, results } = ctx;
  compare(results);
  if (opts.quick && made.needsStore)
    note(
      `--quick: ${fmtN(ctx.questions.total)} subscribers and ${opts.durationS} s rows; the targets assume 1,000,000 and 10 s`,
    );
  if (ctx.service.workersFlag === 'not given' && ctx.service.observedWorkers > 0)
    note(`serve ran ${ctx.service.observedWorkers} workers by default`);
  const { memory, sdk, invalidation, feed, sdkfeed, stripefeed } = ctx.findings;
  const targetList = [
    ...targets(results, invalidation, memory),
    feedTarget(feed),
    ...sdkTargets(sdk, sdkfeed),
    stripeFeedTarget(stripefeed),
  ];
  const output = summaryText(ctx, made, targetList);
  process.stdout.write(`\n${output}\n`);
  writeResults(ctx, made, targetList, output);
}

/** The table the bench prints, the targets of issues 5, 11 and 12, and the JSON it writes. */
import type { FeedResult } from './feed.js';
import type { InvalidationResult } from './invalidation.js';
import type { StripeFeedResult } from './stripe-feed.js';
import type { LoadResult } from './load.js';

export type RowName =
  | 'baseline'
  | 'hot1'
  | 'writes'
  | 'hooks'
  | 'hot'
  | 'secretkey'
  | 'unknown'
  | 'dunning'
  | 'dunninglinks'
  | 'zipf'
  | 'hotkey'
  | 'drip'
  | 'zipfcold'
  | 'peer'
  | 'express'
  | 'middleware';

export interface RowResult {
  row: RowName;
  what: string;
  load: LoadResult;
  /** RSS right after the run; with workers, their sum. */
  rssMb: number;
  rssNote: string;
  /** A cluster's primary, not in rssMb. */
  primaryRssMb: number | null;
  workers: number;
  /** CPU used by the server process(es) during the run, in % of one core. */
  serverCpuPct: number;
  /** CPU used by the bench database's PostgreSQL backends (null: embedded, in the server's process). */
  dbCpuPct: number | null;
  /** CPU used by everything else on the machine during the run, in % of one core. */
  otherCpuPct: number;
  /** The 1-minute load average just before the run. */
  loadAverage: number;
  check: { sampled: number; ok: number; mismatches: string[] };
  vsBaseline: number | null;
  vsPeer: number | null;
}

/** One process on an empty store and one on the seeded store, each loaded and idle. */
export interface MemoryResult {
  subscribers: number;
  emptyRssMb: number;
  fullRssMb: number;
  /** (full RSS - empty RSS) / subscribers. */
  bytesPerSubscriber: number | null;
  /** The subscriber index's arrays alone. */
  indexBytesPerSubscriber: number | null;
  /** The read model's load, as the service reports it. */
  loadSeconds: number;
  /** From the start of the process to its first /readyz 200. */
  readySeconds: number;
}

export function memoryLine(m: MemoryResult): string {
  return (
    `read model (one process): ${fmtInt(m.subscribers)} subscribers loaded in ${fmt(m.loadSeconds)} s (ready ${fmt(m.readySeconds)} s after the start); ` +
    `RSS ${fmt(m.fullRssMb, 1)} MB against ${fmt(m.emptyRssMb, 1)} MB with none: ${fmt(m.bytesPerSubscriber, 1)} bytes per subscriber (the index alone ${fmt(m.indexBytesPerSubscriber, 1)})`
  );
}

export interface Target {
  figure: string;
  target: string;
  value: string;
  met: boolean | null;
}

const fmtInt = (n: number) => Math.round(n).toLocaleString('en-US');
const fmt = (n: number | null | undefined, digits = 2) =>
  n === null || n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(digits);

function pad(cells: string[], widths: number[], right: boolean[]): string {
  return cells.map((c, i) => (right[i] ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0))).join('  ');
}

export function table(rows: RowResult[]): string {
  const header = [
    'row',
    'what',
    'req/s',
    'p50 ms',
    'p99 ms',
    'RSS MB',
    'srv CPU',
    'db CPU',
    'gen CPU',
    'other CPU',
    '/baseline',
    '/peer',
    'non-2xx',
    'checked',
  ];
  const right = [false, false, true, true, true, true, true, true, true, true, true, true, true, true];
  const body = rows.map((r) => [
    r.row,
    r.what,
    fmtInt(r.load.rps),
    fmt(r.load.p50Ms),
    fmt(r.load.p99Ms),
    `${fmt(r.rssMb, 1)}${r.workers > 0 ? '*' : ''}`,
    `${fmtInt(r.serverCpuPct)}%`,
    r.dbCpuPct === null ? '-' : `${fmtInt(r.dbCpuPct)}%`,
    r.load.generatorCpuPct === null ? '-' : `${fmtInt(r.load.generatorCpuPct)}%`,
    `${fmtInt(r.otherCpuPct)}%`,
    fmt(r.vsBaseline),
    fmt(r.vsPeer),
    fmtInt(r.load.non2xx + r.load.socketErrors),
    r.check.sampled === 0 ? '-' : `${r.check.ok}/${r.check.sampled}`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => (b[i] ?? '').length)));
  return [
    pad(header, widths, right),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...body.map((b) => pad(b, widths, right)),
  ].join('\n');
}

export function invalidationLine(inv: InvalidationResult | { skipped: string }): string {
  if ('skipped' in inv) return `propagation across 2 instances: skipped (${inv.skipped})`;
  return (
    `propagation across 2 instances (${inv.trials} changes through A's admin API; B polled on ${inv.connections} connection${inv.connections > 1 ? 's, until all answered' : ''}): ` +
    `p50 ${fmt(inv.p50Ms)} ms, p99 ${fmt(inv.p99Ms)} ms, max ${fmt(inv.maxMs)} ms, ` +
    `timeouts (> 5 s) ${inv.timeouts}/${inv.trials}${inv.errors.length > 0 ? `, errors ${inv.errors.length}` : ''}`
  );
}

export function feedLine(feed: FeedResult | { skipped: string }): string {
  if ('skipped' in feed) return `status feed across 2 instances: skipped (${feed.skipped})`;
  const after = [...feed.afterAnswerMs].sort((x, y) => x - y);
  return (
    `status feed across 2 instances (${feed.trials} changes through A's admin API, each awaited by a long poll on B): ` +
    `p50 ${fmt(feed.p50Ms)} ms, p99 ${fmt(feed.p99Ms)} ms, max ${fmt(feed.maxMs)} ms from the PUT sent ` +
    `(p50 ${fmt(after[Math.floor(after.length / 2)])} ms from its answer), timeouts ${feed.timeouts}/${feed.trials}${feed.errors.length > 0 ? `, errors ${feed.errors.length}` : ''}`
  );
}

/** One mix of the sdk row (bench/sdk.ts): a copy of that many non-active subscribers. */
export interface SdkMix {
  mix: 'plain' | 'dunning';
  count: number;
  listMs: number;
  bytesPerSubscriber: number;
  hitNs: number;
  missNs: number;
  mapHitNs: number;
  mapMissNs: number;
}

export interface SdkResult {
  count: number;
  payUrlLength: number;
  /** What a pay link's string alone takes on the heap. */
  payUrlBytes: number;
  plain: SdkMix;
  dunning: SdkMix;
}

export function sdkLine(s: SdkResult): string {
  const mix = (m: SdkMix) =>
    `status() ${fmt(m.hitNs, 0)} ns a hit, ${fmt(m.missNs, 0)} ns a miss (a bare Map.get ${fmt(m.mapHitNs, 0)} / ${fmt(m.mapMissNs, 0)}), ${fmt(m.bytesPerSubscriber, 1)} bytes a subscriber, listed in ${fmt(m.listMs, 0)} ms`;
  return (
    `@dunwall/node copy of ${fmtInt(s.count)} non-active subscribers: plain (no pay link, no scheduled lockout): ${mix(s.plain)}; ` +
    `in dunning (${s.payUrlLength}-character pay links, ${fmt(s.payUrlBytes, 0)} bytes each, and scheduled lockouts): ${mix(s.dunning)}`
  );
}

export function sdkFeedLine(feed: FeedResult | { skipped: string }): string {
  if ('skipped' in feed) return `@dunwall/node across 2 instances: skipped (${feed.skipped})`;
  const after = [...feed.afterAnswerMs].sort((x, y) => x - y);
  return (
    `@dunwall/node across 2 instances (${feed.trials} changes through A's admin API, each awaited in a copy following B): ` +
    `p50 ${fmt(feed.p50Ms)} ms, p99 ${fmt(feed.p99Ms)} ms, max ${fmt(feed.maxMs)} ms from the PUT sent ` +
    `(p50 ${fmt(after[Math.floor(after.length / 2)])} ms from its answer), timeouts ${feed.timeouts}/${feed.trials}${feed.errors.length > 0 ? `, errors ${feed.errors.length}` : ''}`
  );
}

export function sdkTargets(sdk: SdkResult | null, feed: FeedResult | { skipped: string } | null): Target[] {
  const out: Target[] = [];
  const worst =
    sdk === null ? null : Math.max(sdk.plain.hitNs, sdk.plain.missNs, sdk.dunning.hitNs, sdk.dunning.missNs);
  out.push({
    figure: '@dunwall/node status(), 100k non-active subscribers, slowest of hit / miss',
    target: '< 1000 ns',
    value: worst === null ? '-' : `${fmt(worst, 0)} ns`,
    met: worst === null ? null : worst < 1000,
  });
  const plain = sdk?.plain.bytesPerSubscriber ?? null;
  out.push({
    figure: '@dunwall/node bytes per non-active subscriber (no pay link)',
    target: '<= 200',
    value: plain === null ? '-' : fmt(plain, 1),
    met: plain === null ? null : plain <= 200,
  });
  const dunning = sdk === null ? null : sdk.dunning.bytesPerSubscriber - sdk.payUrlBytes;
  out.push({
    figure: '@dunwall/node bytes per subscriber in dunning, beside its pay link',
    target: '<= 200',
    value: dunning === null ? '-' : fmt(dunning, 1),
    met: dunning === null ? null : dunning <= 200,
  });
  const figure = '@dunwall/node across instances (write on A, copy following B), p99';
  if (feed === null || 'skipped' in feed) out.push({ figure, target: '< 100 ms', value: '-', met: null });
  else {
    const bad = feed.timeouts > 0 || feed.p99Ms === null;
    out.push({
      figure,
      target: '< 100 ms',
      value: bad ? `${fmt(feed.p99Ms)} ms, ${feed.timeouts} timeouts` : `${fmt(feed.p99Ms)} ms`,
      met: !bad && (feed.p99Ms ?? Infinity) < 100,
    });
  }
  return out;
}

export function feedTarget(feed: FeedResult | { skipped: string } | null): Target {
  const figure = 'status feed across instances (write on A, long poll on B), p99';
  if (feed === null || 'skipped' in feed) return { figure, target: '< 100 ms', value: '-', met: null };
  const bad = feed.timeouts > 0 || feed.p99Ms === null;
  return {
    figure,
    target: '< 100 ms',
    value: bad ? `${fmt(feed.p99Ms)} ms, ${feed.timeouts} timeouts` : `${fmt(feed.p99Ms)} ms`,
    met: !bad && (feed.p99Ms ?? Infinity) < 100,
  };
}

export function targets(
  rows: RowResult[],
  inv: InvalidationResult | { skipped: string } | null,
  memory: MemoryResult | null,
): Target[] {
  const get = (name: RowName) => rows.find((r) => r.row === name);
  const hot = get('hot');
  const zipf = get('zipf');
  const out: Target[] = [];
  const ratio = (figure: string, target: number, value: number | null | undefined, unit = '') =>
    out.push({
      figure,
      target: `>= ${target}${unit}`,
      value: value === null || value === undefined ? '-' : `${fmt(value)}${unit}`,
      met: value === null || value === undefined ? null : value >= target,
    });
  const hot1 = get('hot1');
  ratio('lookup, 10k customers with hmac, one process / baseline node:http', 0.8, hot1?.vsBaseline);
  ratio('the same / peer (query per request)', 4, hot1?.vsPeer, 'x');
  const p99one = hot1?.load.p99Ms;
  out.push({
    figure: 'p99 at 50 connections, the same',
    target: '<= 5 ms',
    value: p99one === undefined ? '-' : `${fmt(p99one)} ms`,
    met: p99one === undefined ? null : p99one <= 5,
  });
  // The target is ours: webhooks are sent from the lookup's process, and must not slow it much.
  const hooks = get('hooks');
  const writes = get('writes');
  ratio(
    'lookups while 50 changes/s are sent as webhooks / the same changes, no endpoint',
    0.9,
    hooks && writes && writes.load.rps > 0 ? hooks.load.rps / writes.load.rps : null,
  );
  const drip = get('drip');
  const served = drip
    ? (drip.load.requests - drip.load.non2xx - drip.load.socketErrors) / Math.max(1, drip.load.requests)
    : null;
  out.push({
    figure: '1,100 dripping connections from one address: others served',
    target: '100%',
    value: served === null ? '-' : `${(served * 100).toFixed(3)}%`,
    met:
      served === null
        ? null
        : drip !== undefined && drip.load.non2xx + drip.load.socketErrors === 0 && drip.load.requests > 0,
  });
  ratio('hot lookup throughput, all workers / baseline node:http', 0.8, hot?.vsBaseline);
  ratio('Zipf mix / baseline', 0.7, zipf?.vsBaseline);
  ratio('hot lookup / peer (query per request)', 4, hot?.vsPeer, 'x');
  const hotkey = get('hotkey');
  const zipfcold = get('zipfcold');
  const per = (a: RowResult | undefined, b: RowResult | undefined) =>
    a && b && b.load.rps > 0 ? a.load.rps / b.load.rps : null;
  ratio('one hot customer / hot lookup (10k customers)', 0.95, per(hotkey, hot));
  ratio('Zipf mix right after a start / Zipf mix', 0.9, per(zipfcold, zipf));
  // @dunwall/node's middleware in front of a bare Express route: what it costs a request it lets through.
  ratio(
    'Express route behind the @dunwall/node middleware / the bare route',
    0.95,
    per(get('middleware'), get('express')),
  );
  const p99 = hot?.load.p99Ms;
  out.push({
    figure: 'p99 latency, hot',
    target: '<= 5 ms',
    value: p99 === undefined ? '-' : `${fmt(p99)} ms`,
    met: p99 === undefined ? null : p99 <= 5,
  });
  const rss = Math.max(
    ...rows
      .filter((r) => ['hot1', 'hot', 'unknown', 'zipf', 'hotkey', 'drip', 'zipfcold'].includes(r.row))
      .map((r) => r.rssMb / Math.max(1, r.workers)),
    -1,
  );
  out.push({
    figure: 'RSS per service process (largest row, after its run)',
    target: '<= 160 MB',
    value: rss < 0 ? '-' : `${fmt(rss, 1)} MB`,
    met: rss < 0 ? null : rss <= 160,
  });
  const bytes = memory?.bytesPerSubscriber ?? null;
  out.push({
    figure: 'read model bytes per subscriber (RSS difference)',
    target: '<= 48',
    value: bytes === null ? '-' : fmt(bytes, 1),
    met: bytes === null ? null : bytes <= 48,
  });
  const loadS = memory?.loadSeconds;
  out.push({
    figure: 'read model load time',
    target: '<= 5 s',
    value: loadS === undefined || !Number.isFinite(loadS) ? '-' : `${fmt(loadS)} s`,
    met: loadS === undefined || !Number.isFinite(loadS) ? null : loadS <= 5,
  });
  if (inv && !('skipped' in inv)) {
    const bad = inv.timeouts > 0 || inv.p99Ms === null;
    out.push({
      figure: 'propagation across instances, p99',
      target: '<= 100 ms',
      value: bad ? `${fmt(inv.p99Ms)} ms, ${inv.timeouts} timeouts` : `${fmt(inv.p99Ms)} ms`,
      met: !bad && (inv.p99Ms ?? Infinity) <= 100,
    });
  } else {
    out.push({ figure: 'propagation across instances, p99', target: '<= 100 ms', value: '-', met: null });
  }
  return out;
}

export function targetsTable(list: Target[]): string {
  const widths = [
    Math.max(...list.map((t) => t.figure.length)),
    Math.max(...list.map((t) => t.target.length)),
    Math.max(...list.map((t) => t.value.length)),
  ];
  return list
    .map(
      (t) =>
        `${t.figure.padEnd(widths[0] ?? 0)}  ${t.target.padEnd(widths[1] ?? 0)}  ${t.value.padStart(widths[2] ?? 0)}  ${t.met === null ? 'not measured' : t.met ? 'met' : 'MISSED'}`,
    )
    .join('\n');
}

/** The median of the rounds' figures (null when none has one). */
function medianOf(values: readonly (number | null)[]): number | null {
  const known = values.filter((v): v is number => v !== null).sort((x, y) => x - y);
  if (known.length === 0) return null;
  const mid = Math.floor(known.length / 2);
  return known.length % 2 === 1 ? (known[mid] ?? null) : ((known[mid - 1] ?? 0) + (known[mid] ?? 0)) / 2;
}

export function stripeFeedLines(rounds: readonly StripeFeedResult[] | { skipped: string }): string[] {
  if ('skipped' in rounds) return [`Stripe events to @dunwall/node across 2 instances: skipped (${rounds.skipped})`];
  const events = rounds[0]?.series.map((s) => s.event) ?? [];
  const lines = [
    `Stripe events to @dunwall/node across 2 instances (signed deliveries to A on a fresh database, a copy following B), median of ${rounds.length} rounds: ` +
      `p50 ${fmt(medianOf(rounds.map((r) => r.p50Ms)))} ms, p99 ${fmt(medianOf(rounds.map((r) => r.p99Ms)))} ms, max ${fmt(medianOf(rounds.map((r) => r.maxMs)))} ms from the delivery sent`,
  ];
  for (const event of events) {
    const of = rounds.map((r) => r.series.find((s) => s.event === event));
    const timeouts = of.reduce((n, s) => n + (s?.timeouts ?? 0), 0);
    lines.push(
      `  ${event} (${of[0]?.status ?? '?'}): p50 ${fmt(medianOf(of.map((s) => s?.p50Ms ?? null)))} ms, p99 ${fmt(medianOf(of.map((s) => s?.p99Ms ?? null)))} ms, ` +
        `max ${fmt(medianOf(of.map((s) => s?.maxMs ?? null)))} ms; rounds' p50 ${of.map((s) => fmt(s?.p50Ms ?? null)).join(' / ')} ms; ` +
        `p50 ${fmt(medianOf(of.flatMap((s) => s?.afterAnswerMs ?? [])))} ms from A's 200; timeouts ${timeouts}`,
    );
  }
  return lines;
}

export function stripeFeedTarget(rounds: readonly StripeFeedResult[] | { skipped: string } | null): Target {
  const figure =
    'Stripe events to @dunwall/node across instances (delivery on A, copy following B), p99 (median of rounds)';
  if (rounds === null || 'skipped' in rounds || rounds.length === 0)
    return { figure, target: '< 100 ms', value: '-', met: null };
  const p99 = medianOf(rounds.map((r) => r.p99Ms));
  const timeouts = rounds.reduce((n, r) => n + r.timeouts, 0);
  const bad = timeouts > 0 || p99 === null;
  return {
    figure,
    target: '< 100 ms',
    value: bad ? `${fmt(p99)} ms, ${timeouts} timeouts` : `${fmt(p99)} ms`,
    met: !bad && (p99 ?? Infinity) < 100,
  };
}

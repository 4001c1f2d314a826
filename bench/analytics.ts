/**
 * The analytics row: a tenant of a million subscribers with a year of dunning history, and
 * a few smaller tenants beside it in the same tables (so that reading one tenant's runs is
 * not reading the table), seeded set-based; then the recovery analytics (week and month
 * over 12 months) and the policy impact asked of the service through its admin API, one
 * call at a time, as the console asks them.
 */
import { Agent } from 'node:http';
import { loadavg } from 'node:os';
import { migrate, openDb } from '../src/store/index.js';
import type { Db, StoreTarget } from '../src/store/index.js';
import { call } from './http.js';

/**
 * The measured tenant, then the others; subscribers of each. The others hold two thirds of
 * every table, as a service of many tenants would: a plan that reads the table for one
 * tenant shows.
 */
export const ANALYTICS_TENANT = 'bench-analytics';
export const ANALYTICS_TENANTS: readonly { slug: string; subscribers: number }[] = [
  { slug: ANALYTICS_TENANT, subscribers: 1_000_000 },
  { slug: 'bench-analytics-b', subscribers: 1_000_000 },
  { slug: 'bench-analytics-c', subscribers: 500_000 },
  { slug: 'bench-analytics-d', subscribers: 500_000 },
];

/**
 * The data set, from the subscriber's number n alone (the SQL below is its only writer):
 * - n % 100 < 3 have an open run (3%): warning for 0 and 1, lockout for 2, started in the
 *   last 30 days;
 * - n % 10 < 4 have one ended run, n % 10 = 4 two (0.6 a subscriber, about 5% a month),
 *   started 380 to 22 days before the anchor, each ended 1 hour to 21 days later: 78% paid,
 *   12% voided, 7% subscription ended, 3% removed;
 * - amounts 5.00 to 104.00 in usd (60%), eur (30%) or gbp (10%); decline classes soft 60%,
 *   authentication 15%, exhausted 15%, hard 10%;
 * - n % 1000 = 999: an admin's lockout (an override);
 * - one episode (`sub_a<n>`) per subscriber with a run, unresolved while a run is open, and
 *   one invoice per run.
 */
const OPEN_PER_100 = 3;
const DAY_S = 86_400;

export interface AnalyticsSeed {
  /** The day the history ends at (midnight UTC): the range asked is the 12 months before it. */
  anchor: Date;
  subscribers: number;
  /** Runs of the measured tenant: open, and ended in the range asked. */
  open: number;
  endedInRange: number;
  /** Runs of every tenant in the table. */
  allRuns: number;
  seconds: number | null;
}

/** The subscribers' SQL, for the tenants in $1 (ids) and $2 (sizes), anchored at $3. */
const SUBSCRIBERS_SQL = `
  INSERT INTO subscribers (tenant_id, processor_customer_id, status, derived_status, reason, status_at, overridden_at, updated_at)
  SELECT t.id, 'cus_a' || n, x.status, x.status, x.reason,
    CASE WHEN n % 1000 = 999 THEN $3::timestamptz - interval '3 days' ELSE $3::timestamptz - ((n * 7919) % (30 * ${DAY_S})) * interval '1 second' END,
    CASE WHEN n % 1000 = 999 THEN $3::timestamptz - interval '3 days' END, $3::timestamptz
  FROM unnest($1::int[], $2::int[]) AS t (id, size), generate_series(1::bigint, t.size) AS n,
    LATERAL (SELECT CASE WHEN n % 1000 = 999 THEN 'lockout' WHEN n % 100 < 2 THEN 'warning' WHEN n % 100 = 2 THEN 'lockout' ELSE 'active' END AS status,
      CASE WHEN n % 1000 = 999 THEN 'manual' WHEN n % 100 < 2 THEN 'soft_decline' WHEN n % 100 = 2 THEN 'retries_exhausted' ELSE 'manual' END AS reason) x`;

/**
 * The runs of every tenant in one statement, in the order of their start: the table holds
 * tenants interleaved, as it does when they are written over time.
 */
const RUNS_SQL = `
  INSERT INTO dunning_runs (tenant_id, processor_customer_id, episode, started_at, ended_at, outcome, invoice_id, amount, currency, decline_class)
  SELECT r.tenant_id, 'cus_a' || r.n, 'sub_a' || r.n, r.started_at, r.ended_at, r.outcome, 'in_a' || r.n || '_' || r.k,
    500 + (r.n * 37) % 100 * 100,
    CASE WHEN r.n % 10 < 6 THEN 'usd' WHEN r.n % 10 < 9 THEN 'eur' ELSE 'gbp' END,
    CASE WHEN (r.n * 17 + r.k * 3) % 20 < 12 THEN 'soft' WHEN (r.n * 17 + r.k * 3) % 20 < 15 THEN 'authentication'
      WHEN (r.n * 17 + r.k * 3) % 20 < 18 THEN 'exhausted' ELSE 'hard' END
  FROM (
    SELECT t.id AS tenant_id, n, 0 AS k, $3::timestamptz - ((n * 7919) % (30 * ${DAY_S})) * interval '1 second' AS started_at,
      NULL::timestamptz AS ended_at, NULL::text AS outcome
    FROM unnest($1::int[], $2::int[]) AS t (id, size), generate_series(1::bigint, t.size) AS n
    WHERE n % 100 < ${OPEN_PER_100}
    UNION ALL
    SELECT t.id, n, k, s.started_at, s.started_at + (3600 + (n * 31 + k * 17) % (21 * ${DAY_S})) * interval '1 second',
      CASE WHEN (n * 13 + k * 7) % 100 < 78 THEN 'paid' WHEN (n * 13 + k * 7) % 100 < 90 THEN 'voided'
        WHEN (n * 13 + k * 7) % 100 < 97 THEN 'subscription_ended' ELSE 'removed' END
    FROM unnest($1::int[], $2::int[]) AS t (id, size), generate_series(1::bigint, t.size) AS n,
      generate_series(1, CASE WHEN n % 10 < 4 THEN 1 WHEN n % 10 = 4 THEN 2 ELSE 0 END) AS k,
      LATERAL (SELECT $3::timestamptz - interval '380 days' + ((n * 104729 + k * 7907) % (358 * ${DAY_S})) * interval '1 second' AS started_at) s
  ) r
  ORDER BY r.started_at`;

/** Each subscriber's episode: unresolved while its run is open, else resolved by its last run. */
const EPISODES_SQL = `
  INSERT INTO subscriber_episodes (tenant_id, processor_customer_id, episode, state, reason, at, rank, event_id, updated_at, dunning_started_at, resolved_at, invoice_id)
  SELECT DISTINCT ON (r.tenant_id, r.processor_customer_id) r.tenant_id, r.processor_customer_id, r.episode,
    CASE WHEN r.ended_at IS NOT NULL THEN 'resolved' WHEN s.status = 'lockout' THEN 'lockout' ELSE 'warning' END,
    CASE WHEN r.ended_at IS NOT NULL THEN CASE WHEN r.outcome IN ('voided', 'subscription_ended') THEN r.outcome ELSE 'paid' END ELSE s.reason END,
    COALESCE(r.ended_at, r.started_at), 0, 'evt_' || r.invoice_id, $2::timestamptz, r.started_at, r.ended_at, r.invoice_id
  FROM dunning_runs r JOIN subscribers s ON s.tenant_id = r.tenant_id AND s.processor_customer_id = r.processor_customer_id
  WHERE r.tenant_id = ANY ($1::int[])
  ORDER BY r.tenant_id, r.processor_customer_id, r.ended_at DESC NULLS FIRST`;

const INVOICES_SQL = `
  INSERT INTO stripe_invoices (tenant_id, invoice_id, processor_customer_id, episode, auto_collected, first_invoice, amount_due, amount_remaining, currency, status, observed_at)
  SELECT tenant_id, invoice_id, processor_customer_id, episode, true, false, amount, CASE WHEN outcome = 'paid' THEN 0 ELSE amount END, currency,
    CASE outcome WHEN 'paid' THEN 'paid' WHEN 'voided' THEN 'void' WHEN 'subscription_ended' THEN 'uncollectible' WHEN 'removed' THEN 'open' ELSE 'open' END,
    COALESCE(ended_at, started_at)
  FROM dunning_runs WHERE tenant_id = ANY ($1::int[])`;

/** Seeding a million subscribers runs longer than the service's bound on a query. */
const SEED_QUERY_TIMEOUT_MS = 600_000;

async function withDb<T>(target: StoreTarget, fn: (db: Db) => Promise<T>): Promise<T> {
  const db = await openDb(target.engine === 'postgres' ? { ...target, queryTimeoutMs: SEED_QUERY_TIMEOUT_MS } : target);
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/** Today, midnight UTC. */
function today(): Date {
  const d = new Date();
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()));
}

/** The range asked: the 12 months before the anchor. */
export function analyticsRange(anchor: Date): { from: Date; to: Date } {
  const from = new Date(anchor);
  from.setUTCFullYear(from.getUTCFullYear() - 1);
  return { from, to: anchor };
}

/**
 * Seeds the analytics tenants (once: a reused store keeps them, their anchor the measured
 * tenant's `created_at`), in one transaction, the triggers skipped as the main seed skips
 * them; then VACUUM ANALYZE, so that index-only scans and the plans are those of a settled table.
 */
export async function seedAnalytics(target: StoreTarget, log: (line: string) => void): Promise<AnalyticsSeed> {
  const started = performance.now();
  const { anchor, seeded } = await withDb(target, async (db) => {
    await migrate(db);
    const [exists] = await db.query<{ created_at: Date }>('SELECT created_at FROM tenants WHERE slug = $1', [
      ANALYTICS_TENANT,
    ]);
    if (exists) return { anchor: new Date(exists.created_at), seeded: false };
    const at = today();
    await db.transaction(async (tx) => {
      await tx.exec("SET LOCAL statement_timeout = '0'");
      const [su] = await tx.query<{ on: boolean }>("SELECT current_setting('is_superuser') = 'on' AS on");
      if (su?.on) await tx.exec('SET LOCAL session_replication_role = replica');
      const ids: number[] = [];
      for (const t of ANALYTICS_TENANTS) {
        const [row] = await tx.query<{ id: number }>(
          `INSERT INTO tenants (slug, tier, created_at, updated_at) VALUES ($1, 'growth', $2, $2) RETURNING id`,
          [t.slug, at],
        );
        if (row === undefined) throw new Error(`tenant ${t.slug} not created`);
        ids.push(row.id);
      }
      const sizes = ANALYTICS_TENANTS.map((t) => t.subscribers);
      const step = async (what: string, sql: string, params: unknown[]) => {
        const t0 = performance.now();
        await tx.query(sql, params);
        log(`${what} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      };
      await step('subscribers', SUBSCRIBERS_SQL, [ids, sizes, at]);
      await step('dunning runs', RUNS_SQL, [ids, sizes, at]);
      await step('episodes', EPISODES_SQL, [ids, at]);
      await step('invoices', INVOICES_SQL, [ids]);
    });
    return { anchor: at, seeded: true };
  });
  if (seeded && target.engine === 'postgres') {
    // Outside the transaction: VACUUM cannot run in one. Its own connection, unbounded.
    const db = await openDb({ ...target, queryTimeoutMs: SEED_QUERY_TIMEOUT_MS });
    try {
      const t0 = performance.now();
      await db.exec('VACUUM ANALYZE subscribers, subscriber_episodes, dunning_runs, stripe_invoices');
      log(`VACUUM ANALYZE in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    } finally {
      await db.close();
    }
  }
  const seconds = seeded ? (performance.now() - started) / 1000 : null;
  const { from, to } = analyticsRange(anchor);
  const counts = await withDb(target, async (db) => {
    const [row] = await db.query<{ subscribers: number; open: number; ended: number; all_runs: number }>(
      `SELECT (SELECT count(*)::int FROM subscribers WHERE tenant_id = t.id) AS subscribers,
         (SELECT count(*)::int FROM dunning_runs WHERE tenant_id = t.id AND ended_at IS NULL) AS open,
         (SELECT count(*)::int FROM dunning_runs WHERE tenant_id = t.id AND ended_at >= $2 AND ended_at < $3) AS ended,
         (SELECT count(*)::int FROM dunning_runs) AS all_runs
       FROM tenants t WHERE t.slug = $1`,
      [ANALYTICS_TENANT, from, to],
    );
    return row;
  });
  return {
    anchor,
    subscribers: counts?.subscribers ?? 0,
    open: counts?.open ?? 0,
    endedInRange: counts?.ended ?? 0,
    allRuns: counts?.all_runs ?? 0,
    seconds,
  };
}

/** Calendar months (UTC) that [from, to) touches. */
function monthsOf(from: Date, to: Date): number {
  const first = from.getUTCFullYear() * 12 + from.getUTCMonth();
  const last = to.getUTCFullYear() * 12 + to.getUTCMonth();
  const touchesLast = to.getTime() > Date.UTC(to.getUTCFullYear(), to.getUTCMonth(), 1);
  return last - first + (touchesLast ? 1 : 0);
}

/** The open runs the data set gives a tenant of `size` subscribers: what `at_risk.count` must say. */
export function expectedOpen(size: number): number {
  let n = 0;
  for (let i = 1; i <= size; i += 1) if (i % 100 < OPEN_PER_100) n += 1;
  return n;
}

export interface CallFigures {
  /** What was asked (path and query), and how many answers were timed. */
  call: string;
  calls: number;
  medianMs: number;
  p95Ms: number;
  minMs: number;
  maxMs: number;
  /** Bytes of one answer. */
  bytes: number;
}

export interface AnalyticsResult {
  seed: AnalyticsSeed;
  calls: CallFigures[];
  /** What the answers were checked against, and whether they matched. */
  checks: string[];
  failures: string[];
  /** The machine's load average (1 min) before the calls: above its cores, other work skewed them. */
  loadAverage: number;
}

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i] ?? NaN;
}

/** A call's time, taken `calls` times one after the other after `warmup` untimed ones. */
async function timeCalls(
  agent: Agent,
  base: URL,
  path: string,
  headers: Record<string, string>,
  warmup: number,
  calls: number,
) {
  const times: number[] = [];
  let body = '';
  for (let i = 0; i < warmup + calls; i += 1) {
    const t0 = performance.now();
    const answer = await call(agent, base, 'GET', path, headers, undefined, ANSWER_TIMEOUT_MS);
    const ms = performance.now() - t0;
    if (answer.status !== 200) throw new Error(`GET ${path}: ${answer.status} ${answer.body.slice(0, 300)}`);
    body = answer.body;
    if (i >= warmup) times.push(ms);
  }
  times.sort((a, b) => a - b);
  const figures: CallFigures = {
    call: path,
    calls,
    medianMs: quantile(times, 0.5),
    p95Ms: quantile(times, 0.95),
    minMs: times[0] ?? NaN,
    maxMs: times.at(-1) ?? NaN,
    bytes: Buffer.byteLength(body),
  };
  return { figures, body };
}

/** An answer may take longer than a lookup's: bounded all the same. */
const ANSWER_TIMEOUT_MS = 60_000;

/**
 * Asks the service for the measured tenant's analytics: the recovery analytics by week and
 * by month over the 12 months before the anchor, and the impact of a proposed policy (a
 * week's grace, escalation after 14 days), each `calls` times after 2 untimed calls.
 */
export async function measureAnalytics(opts: {
  url: string;
  adminToken: string;
  seed: AnalyticsSeed;
  calls: number;
}): Promise<AnalyticsResult> {
  const { from, to } = analyticsRange(opts.seed.anchor);
  const base = new URL(opts.url);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const headers = { authorization: `Bearer ${opts.adminToken}` };
  const prefix = `/admin/v1/tenants/${ANALYTICS_TENANT}/analytics`;
  const range = `from=${encodeURIComponent(from.toISOString())}&to=${encodeURIComponent(to.toISOString())}`;
  const checks: string[] = [];
  const failures: string[] = [];
  const calls: CallFigures[] = [];
  const loadAverage = loadavg()[0] ?? 0;
  const check = (what: string, actual: unknown, expected: unknown) => {
    if (actual === expected) checks.push(`${what} ${String(actual)}`);
    else failures.push(`${what}: got ${String(actual)}, expected ${String(expected)}`);
  };
  try {
    for (const granularity of ['week', 'month'] as const) {
      const { figures, body } = await timeCalls(
        agent,
        base,
        `${prefix}/recovery?${range}&granularity=${granularity}`,
        headers,
        2,
        opts.calls,
      );
      calls.push(figures);
      const answer = JSON.parse(body) as {
        at_risk: { count: number };
        recovered: { ended: number; periods: unknown[] };
      };
      check(
        `${granularity}: at_risk.count`,
        answer.at_risk.count,
        expectedOpen(ANALYTICS_TENANTS[0]?.subscribers ?? 0),
      );
      check(`${granularity}: recovered.ended`, answer.recovered.ended, opts.seed.endedInRange);
      if (granularity === 'month') check('month: periods', answer.recovered.periods.length, monthsOf(from, to));
    }
    const { figures, body } = await timeCalls(
      agent,
      base,
      `${prefix}/policy-impact?grace_days=7&escalate_after_days=14`,
      headers,
      2,
      opts.calls,
    );
    calls.push(figures);
    const impact = JSON.parse(body) as { current: { warning: number; lockout: number } };
    // Every open run's customer, and the admins' lockouts, are answered other than active now.
    check(
      'policy-impact: current warning + lockout',
      impact.current.warning + impact.current.lockout >= opts.seed.open,
      true,
    );
  } finally {
    agent.destroy();
  }
  return { seed: opts.seed, calls, checks, failures, loadAverage };
}

export function analyticsLines(a: AnalyticsResult | { skipped: string } | null): string[] {
  if (a === null) return ['analytics: not run (--rows)'];
  if ('skipped' in a) return [`analytics: skipped (${a.skipped})`];
  const s = a.seed;
  const fmt = (n: number) => n.toLocaleString('en-US');
  const lines = [
    `analytics: tenant ${ANALYTICS_TENANT}, ${fmt(s.subscribers)} subscribers, ${fmt(s.open)} open runs, ${fmt(s.endedInRange)} ended in the 12 months asked; ` +
      `${fmt(s.allRuns)} runs in the table over ${ANALYTICS_TENANTS.length} tenants; ${s.seconds === null ? 'reused' : `seeded in ${s.seconds.toFixed(1)} s`}`,
  ];
  for (const c of a.calls) {
    lines.push(
      `  ${c.call.replace(/^\/admin\/v1\/tenants\/[^/]+/, '').replace(/from=[^&]*&to=[^&]*&?/, '')}: median ${c.medianMs.toFixed(1)} ms, p95 ${c.p95Ms.toFixed(1)} ms ` +
        `(min ${c.minMs.toFixed(1)}, max ${c.maxMs.toFixed(1)}; ${c.calls} calls, ${fmt(c.bytes)} bytes)`,
    );
  }
  lines.push(
    `  load average ${a.loadAverage.toFixed(1)} before the calls (above the cores, other work shared the machine)`,
  );
  lines.push(`  checked: ${a.failures.length === 0 ? a.checks.join('; ') : `WRONG ${a.failures.join('; ')}`}`);
  return lines;
}

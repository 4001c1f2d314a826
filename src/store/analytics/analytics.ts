import { PolicyImpactTally } from '../../domain/policy.js';
import type { EpisodeInterval, Policy, PolicyImpactCounts } from '../../domain/policy.js';
import { RUN_DECLINE_CLASSES, RUN_OUTCOMES } from '../../domain/runs.js';
import type { AnalyticsGranularity, RunDeclineClass, RunOutcome } from '../../domain/runs.js';
import type { UnresolvedState } from '../../domain/stripe/fold.js';
import type { SubscriberStatus } from '../../domain/types.js';
import type { Db, Queryable } from '../db/db.js';
import { tenantPolicy } from '../stripe/episodes.js';

/**
 * The recovery analytics of a tenant (docs/api.md), over its dunning runs (migration 015).
 * Every figure is aggregated in SQL, the same on PostgreSQL and PGlite; what is left here
 * is summing the groups into the answer. Periods are in UTC. Each statement reads through
 * one of the run indexes, with the tenant first: at risk through `dunning_runs_open`,
 * recovered and time to recover through `dunning_runs_ended`, the rest through
 * `dunning_runs_started`.
 */

export type { AnalyticsGranularity };

export interface AnalyticsQuery {
  /** Runs ended (recovered, time to recover) or started (outcomes, decline mix, cohorts) at or after. */
  from: Date;
  /** ... and before. */
  to: Date;
  granularity: AnalyticsGranularity;
}

/** A sum of invoice amounts in one currency, in its smallest unit. */
export interface CurrencyAmount {
  currency: string;
  amount: number;
}

export interface RecoveredPeriod {
  periodStart: Date;
  /** Runs that ended in the period, whatever their outcome. */
  ended: number;
  /** Runs that ended by payment. */
  recovered: number;
  /** recovered / ended; null when none ended. */
  rate: number | null;
  amounts: CurrencyAmount[];
}

export interface Cohort {
  month: Date;
  started: number;
  /** Of those, the runs since ended by payment. */
  recovered: number;
  rate: number | null;
}

/** Runs whose customer opened a pay or card link, by the period of the run's first open. */
export interface LinkOpensPeriod {
  periodStart: Date;
  /** Runs whose first open of a link (during the run) fell in the period. */
  opened: number;
  /** Of those, the runs that ended by payment. */
  recoveredAfterOpen: number;
  /** Median time from the first open to the payment of those recovered; null: none. */
  medianSecondsToPayment: number | null;
}

export interface LinkOpenAnalytics {
  opened: number;
  recoveredAfterOpen: number;
  /** Median time from a run's first open to its payment, over the runs recovered after an open; null: none. */
  medianSecondsToPayment: number | null;
  periods: LinkOpensPeriod[];
}

export interface RecoveryAnalytics {
  atRisk: { count: number; amounts: CurrencyAmount[] };
  recovered: {
    ended: number;
    recovered: number;
    rate: number | null;
    amounts: CurrencyAmount[];
    periods: RecoveredPeriod[];
  };
  timeToRecover: { medianSeconds: number | null; p90Seconds: number | null };
  outcomes: Record<RunOutcome | 'open', number>;
  declineMix: Record<RunDeclineClass, number>;
  cohorts: Cohort[];
  /** The runs whose customer opened a link through Dunwall (docs/links.md). */
  links: LinkOpenAnalytics;
}

/** What a change of policy would do now, against the tenant's current policy. */
export interface PolicyImpact extends PolicyImpactCounts {
  /** The tenant's policy when it was read. */
  currentPolicy: Policy;
  /** The current policy with the proposed fields over it. */
  proposedPolicy: Policy;
}

/** The tenant's recovery analytics, and what a policy change would do. */
export interface Analytics {
  recoveryAnalytics(tenantId: number, query: AnalyticsQuery): Promise<RecoveryAnalytics>;
  /**
   * Every customer of the tenant with an unresolved episode or an override, answered at `now`
   * under its current policy and under that policy with `proposed` over it.
   */
  policyImpact(tenantId: number, proposed: Partial<Policy>, now: Date): Promise<PolicyImpact>;
}

const rate = (part: number, whole: number): number | null => (whole === 0 ? null : part / whole);

/** Adds `amount` of `currency` to a list kept in currency order. */
function addAmount(list: CurrencyAmount[], currency: string | null, amount: number): void {
  if (currency === null) return;
  const found = list.find((a) => a.currency === currency);
  if (found) found.amount += amount;
  else {
    list.push({ currency, amount });
    list.sort((a, b) => (a.currency < b.currency ? -1 : 1));
  }
}

/**
 * The statements, each scoped to the tenant ($1); the recovery ones take the range ($2, $3)
 * and the granularity ($4). Exported for the test that keeps their plans on the indexes.
 *
 * The runs ended and started are grouped per period inside a lateral subquery, one index
 * range scan a period, by the plain columns only (outcome, currency, class): the planner
 * knows those have a few values each, so it hashes a few groups. Grouped by
 * `date_trunc(..., ended_at)` instead, it took that expression for as many groups as runs,
 * and read the table and sorted every run of the range on disk (a million-subscriber
 * tenant beside two million others: 412 and 918 ms, against 200 and 158 ms; docs/operations.md,
 * analytics).
 */
export const RECOVERY_SQL = {
  atRisk: `SELECT currency, count(*)::int AS n, COALESCE(sum(amount), 0)::text AS amount
     FROM dunning_runs WHERE tenant_id = $1 AND ended_at IS NULL GROUP BY currency`,
  // Every period of the range, empty ones included (one row of nulls), then the runs ended in each.
  ended: `WITH periods AS (
       SELECT generate_series(date_trunc($4, $2::timestamptz AT TIME ZONE 'UTC'), ($3::timestamptz AT TIME ZONE 'UTC') - interval '1 microsecond',
         ('1 ' || $4)::interval) AS period
     )
     SELECT to_char(p.period, 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS period, e.outcome, e.currency, COALESCE(e.n, 0)::int AS n, COALESCE(e.amount, 0)::text AS amount
     FROM periods p LEFT JOIN LATERAL (
       SELECT outcome, currency, count(*)::int AS n, COALESCE(sum(amount), 0) AS amount
       FROM dunning_runs WHERE tenant_id = $1
         AND ended_at >= greatest(p.period AT TIME ZONE 'UTC', $2::timestamptz)
         AND ended_at < least((p.period + ('1 ' || $4)::interval) AT TIME ZONE 'UTC', $3::timestamptz)
       GROUP BY outcome, currency
     ) e ON true
     ORDER BY p.period`,
  times: `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM ended_at - started_at)) AS median,
       percentile_cont(0.9) WITHIN GROUP (ORDER BY extract(epoch FROM ended_at - started_at)) AS p90
     FROM dunning_runs WHERE tenant_id = $1 AND ended_at >= $2 AND ended_at < $3 AND outcome = 'paid'`,
  // The months of the range that have runs started in them.
  started: `WITH months AS (
       SELECT generate_series(date_trunc('month', $2::timestamptz AT TIME ZONE 'UTC'), ($3::timestamptz AT TIME ZONE 'UTC') - interval '1 microsecond',
         interval '1 month') AS month
     )
     SELECT to_char(m.month, 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS month, COALESCE(g.outcome, 'open') AS outcome, g.decline_class, g.n
     FROM months m CROSS JOIN LATERAL (
       SELECT outcome, decline_class, count(*)::int AS n
       FROM dunning_runs WHERE tenant_id = $1
         AND started_at >= greatest(m.month AT TIME ZONE 'UTC', $2::timestamptz)
         AND started_at < least((m.month + interval '1 month') AT TIME ZONE 'UTC', $3::timestamptz)
       GROUP BY outcome, decline_class
     ) g
     ORDER BY m.month`,
  // Each run's first open of a link while it ran (migration 024), for runs that overlap the
  // range; a run counts in the period of that first open.
  linkOpens: `WITH firsts AS (
       SELECT r.id, r.ended_at, r.outcome, min(o.opened_at) AS first_open
       FROM dunning_runs r JOIN customer_link_opens o
         ON o.tenant_id = r.tenant_id AND o.processor_customer_id = r.processor_customer_id
         AND o.opened_at >= r.started_at AND (r.ended_at IS NULL OR o.opened_at <= r.ended_at)
       WHERE r.tenant_id = $1 AND r.started_at < $3 AND (r.ended_at IS NULL OR r.ended_at >= $2)
       GROUP BY r.id, r.ended_at, r.outcome
     ), periods AS (
       SELECT generate_series(date_trunc($4, $2::timestamptz AT TIME ZONE 'UTC'), ($3::timestamptz AT TIME ZONE 'UTC') - interval '1 microsecond',
         ('1 ' || $4)::interval) AS period
     )
     SELECT to_char(p.period, 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS period,
       count(f.id)::int AS opened, count(f.id) FILTER (WHERE f.outcome = 'paid')::int AS recovered,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM f.ended_at - f.first_open)) FILTER (WHERE f.outcome = 'paid') AS median
     FROM periods p LEFT JOIN firsts f ON f.first_open >= greatest(p.period AT TIME ZONE 'UTC', $2::timestamptz)
       AND f.first_open < least((p.period + ('1 ' || $4)::interval) AT TIME ZONE 'UTC', $3::timestamptz)
     GROUP BY p.period ORDER BY p.period`,
  linkOpensMedian: `WITH firsts AS (
       SELECT r.ended_at, min(o.opened_at) AS first_open
       FROM dunning_runs r JOIN customer_link_opens o
         ON o.tenant_id = r.tenant_id AND o.processor_customer_id = r.processor_customer_id
         AND o.opened_at >= r.started_at AND o.opened_at <= r.ended_at
       WHERE r.tenant_id = $1 AND r.outcome = 'paid' AND r.started_at < $3 AND r.ended_at >= $2
       GROUP BY r.id, r.ended_at
     )
     SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM ended_at - first_open)) AS median
     FROM firsts WHERE first_open >= $2 AND first_open < $3`,
} as const;

/** The runs whose customer opened a link, per period and in all. */
async function linkOpenAnalytics(db: Queryable, tenantId: number, q: AnalyticsQuery): Promise<LinkOpenAnalytics> {
  const rows = await db.query<{ period: string; opened: number; recovered: number; median: number | string | null }>(
    RECOVERY_SQL.linkOpens,
    [tenantId, q.from, q.to, q.granularity],
  );
  const [median] = await db.query<{ median: number | string | null }>(RECOVERY_SQL.linkOpensMedian, [
    tenantId,
    q.from,
    q.to,
  ]);
  const periods = rows.map((r) => ({
    periodStart: new Date(String(r.period)),
    opened: Number(r.opened),
    recoveredAfterOpen: Number(r.recovered),
    medianSecondsToPayment: r.median === null ? null : Number(r.median),
  }));
  return {
    opened: periods.reduce((n, p) => n + p.opened, 0),
    recoveredAfterOpen: periods.reduce((n, p) => n + p.recoveredAfterOpen, 0),
    medianSecondsToPayment: median?.median === null || median?.median === undefined ? null : Number(median.median),
    periods,
  };
}

export async function recoveryAnalytics(
  db: Queryable,
  tenantId: number,
  q: AnalyticsQuery,
): Promise<RecoveryAnalytics> {
  const atRiskRows = await db.query<{ currency: string | null; n: number; amount: string }>(RECOVERY_SQL.atRisk, [
    tenantId,
  ]);
  const atRisk = { count: 0, amounts: [] as CurrencyAmount[] };
  for (const r of atRiskRows) {
    atRisk.count += Number(r.n);
    addAmount(atRisk.amounts, r.currency, Number(r.amount));
  }

  const endedRows = await db.query<{
    period: Date | string;
    outcome: string | null;
    currency: string | null;
    n: number;
    amount: string;
  }>(RECOVERY_SQL.ended, [tenantId, q.from, q.to, q.granularity]);
  const periods = new Map<string, RecoveredPeriod>();
  const recovered = {
    ended: 0,
    recovered: 0,
    rate: null as number | null,
    amounts: [] as CurrencyAmount[],
    periods: [] as RecoveredPeriod[],
  };
  for (const r of endedRows) {
    const key = String(r.period);
    let p = periods.get(key);
    if (p === undefined) {
      p = { periodStart: new Date(key), ended: 0, recovered: 0, rate: null, amounts: [] };
      periods.set(key, p);
      recovered.periods.push(p);
    }
    const n = Number(r.n);
    p.ended += n;
    recovered.ended += n;
    if (r.outcome === 'paid') {
      p.recovered += n;
      recovered.recovered += n;
      addAmount(p.amounts, r.currency, Number(r.amount));
      addAmount(recovered.amounts, r.currency, Number(r.amount));
    }
  }
  for (const p of recovered.periods) p.rate = rate(p.recovered, p.ended);
  recovered.rate = rate(recovered.recovered, recovered.ended);

  const [times] = await db.query<{ median: number | string | null; p90: number | string | null }>(RECOVERY_SQL.times, [
    tenantId,
    q.from,
    q.to,
  ]);
  const seconds = (v: number | string | null | undefined): number | null =>
    v === null || v === undefined ? null : Number(v);

  const startedRows = await db.query<{ month: string; outcome: string; decline_class: RunDeclineClass; n: number }>(
    RECOVERY_SQL.started,
    [tenantId, q.from, q.to],
  );
  const outcomes = Object.fromEntries([...RUN_OUTCOMES, 'open'].map((o) => [o, 0])) as Record<
    RunOutcome | 'open',
    number
  >;
  const declineMix = Object.fromEntries(RUN_DECLINE_CLASSES.map((c) => [c, 0])) as Record<RunDeclineClass, number>;
  const cohorts = new Map<string, Cohort>();
  for (const r of startedRows) {
    const n = Number(r.n);
    outcomes[r.outcome as RunOutcome | 'open'] += n;
    declineMix[r.decline_class] += n;
    let c = cohorts.get(r.month);
    if (c === undefined) {
      c = { month: new Date(r.month), started: 0, recovered: 0, rate: null };
      cohorts.set(r.month, c);
    }
    c.started += n;
    if (r.outcome === 'paid') c.recovered += n;
  }
  for (const c of cohorts.values()) c.rate = rate(c.recovered, c.started);

  return {
    atRisk,
    recovered,
    timeToRecover: { medianSeconds: seconds(times?.median), p90Seconds: seconds(times?.p90) },
    outcomes,
    declineMix,
    cohorts: [...cohorts.values()],
    links: await linkOpenAnalytics(db, tenantId, q),
  };
}

/** The most cutoffs two policies have (a grace and an escalation each). */
const MAX_CUTOFFS = 4;
/** Bits of a customer's episode set: per state, one for each interval of its start and one for an unknown start. */
const SLOTS = MAX_CUTOFFS + 2;
const STATE_OFFSET: Readonly<Record<UnresolvedState, number>> = { warning: 0, lockout: SLOTS };

/**
 * The customers any policy can answer other than active (the subscribers derived or answered
 * other than active: the predicate of `subscribers_not_active`, migration 011, as the policy
 * sweep reads them), with what `readCustomerState` gives the policy: an override (the
 * derived status while `overridden_at` is set), or else the unresolved episodes, each as its
 * state and the interval of its dunning start among the cutoffs $2..$5 (the number before
 * it; `infinity` pads the unused ones), one bit per (state, interval) in `kinds`. Customers
 * alike are counted together: the answer is a few rows, however many customers.
 */
export const IMPACT_SQL = `WITH customers AS (
    SELECT CASE WHEN s.overridden_at IS NOT NULL THEN s.derived_status END AS override,
      COALESCE(bit_or(1 << (CASE WHEN e.state = 'lockout' THEN ${STATE_OFFSET.lockout} ELSE ${STATE_OFFSET.warning} END
        + CASE WHEN e.dunning_started_at IS NULL THEN ${SLOTS - 1}
          ELSE (e.dunning_started_at > $2::timestamptz)::int + (e.dunning_started_at > $3::timestamptz)::int
            + (e.dunning_started_at > $4::timestamptz)::int + (e.dunning_started_at > $5::timestamptz)::int END)), 0) AS kinds
    FROM subscribers s
    LEFT JOIN subscriber_episodes e ON s.overridden_at IS NULL AND e.tenant_id = s.tenant_id
      AND e.processor_customer_id = s.processor_customer_id AND e.state <> 'resolved'
    WHERE s.tenant_id = $1 AND (s.derived_status <> 'active' OR s.status <> 'active')
    GROUP BY s.processor_customer_id, s.overridden_at, s.derived_status
  )
  SELECT override, kinds, count(*)::int AS n FROM customers GROUP BY override, kinds`;

/** The episodes a `kinds` bit set stands for. */
function episodesOf(kinds: number): EpisodeInterval[] {
  const episodes: EpisodeInterval[] = [];
  for (const state of ['lockout', 'warning'] as const) {
    for (let slot = 0; slot < SLOTS; slot += 1) {
      if ((kinds & (1 << (STATE_OFFSET[state] + slot))) !== 0)
        episodes.push({ state, interval: slot === SLOTS - 1 ? null : slot });
    }
  }
  return episodes;
}

/**
 * What `proposed` would change (docs/tenant-api.md, policy impact): one statement over the
 * tenant's non-active subscribers and their episodes, aggregated in SQL into groups of
 * customers answered alike (domain/policy.ts, PolicyImpactTally), so that neither the rows
 * sent nor the work here grow with the tenant: about 150 ms for 100,000 customers in dunning
 * on either engine, measured on 2 cores.
 */
export async function policyImpact(
  db: Queryable,
  tenantId: number,
  currentPolicy: Policy,
  proposed: Partial<Policy>,
  now: Date,
): Promise<PolicyImpact> {
  const proposedPolicy: Policy = { ...currentPolicy, ...proposed };
  const tally = new PolicyImpactTally(currentPolicy, proposedPolicy, now.getTime());
  if (tally.cutoffs.length > MAX_CUTOFFS) throw new Error('a policy has more cutoffs than the impact query takes');
  const cutoffs = Array.from({ length: MAX_CUTOFFS }, (_, i) => {
    const at = tally.cutoffs[i];
    return at === undefined ? 'infinity' : new Date(at).toISOString();
  });
  const groups = await db.query<{ override: SubscriberStatus | null; kinds: number; n: number }>(IMPACT_SQL, [
    tenantId,
    ...cutoffs,
  ]);
  for (const g of groups)
    tally.addAlike(g.override, g.override === null ? episodesOf(Number(g.kinds)) : [], Number(g.n));
  return { currentPolicy, proposedPolicy, ...tally.result() };
}

/** A tenant's analytics in SQL. */
export class SqlAnalytics implements Analytics {
  constructor(private readonly db: Db) {}

  async recoveryAnalytics(tenantId: number, query: AnalyticsQuery): Promise<RecoveryAnalytics> {
    return recoveryAnalytics(this.db, tenantId, query);
  }

  async policyImpact(tenantId: number, proposed: Partial<Policy>, now: Date): Promise<PolicyImpact> {
    return policyImpact(this.db, tenantId, await tenantPolicy(this.db, tenantId), proposed, now);
  }
}

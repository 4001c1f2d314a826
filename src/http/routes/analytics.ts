import { MAX_ESCALATE_AFTER_DAYS, MAX_GRACE_DAYS } from '../../domain/policy.js';
import type { Policy } from '../../domain/policy.js';
import { MAX_ANALYTICS_RANGE_DAYS } from '../../domain/runs.js';
import type { Analytics, CurrencyAmount, RecoveryAnalytics as Figures } from '../../store/index.js';
import type { App } from '../app-instance.js';
import { PolicyImpact, PolicyImpactQuery, RecoveryAnalytics, RecoveryQuery } from '../schemas.js';
import { doc, ERRORS, invalid, paramsOf, tenantOf } from './common.js';
import type { Audience } from './common.js';

/**
 * A tenant's analytics (docs/tenant-api.md), for the operator (/admin/v1/tenants/:slug/analytics)
 * and the tenant (/v1/analytics, with `subscribers:read`): the recovery analytics (what is at
 * risk now, what was recovered and how fast, how runs ended, the decline mix and the monthly
 * cohorts, over the tenant's dunning runs), and the impact of a proposed policy (what it would
 * answer now, against the current policy).
 */
export interface AnalyticsRoutesOptions {
  audience: Audience;
  analytics: Analytics;
  now: () => number;
}

const DAY_MS = 86_400_000;
const DEFAULT_RANGE_DAYS = 365;

/** A day (midnight UTC) or an instant with its offset, that is a real date; null otherwise. */
function parseDate(value: string): Date | null {
  const day = /^(\d{4})-(\d{2})-(\d{2})/.exec(value);
  if (day === null) return null;
  const at = new Date(value.length === 10 ? `${value}T00:00:00Z` : value);
  if (Number.isNaN(at.getTime())) return null;
  // Date rolls 2026-02-30 over to March: the day must be the one written.
  const check = new Date(Date.UTC(Number(day[1]), Number(day[2]) - 1, Number(day[3])));
  return check.getUTCMonth() === Number(day[2]) - 1 && check.getUTCDate() === Number(day[3]) ? at : null;
}

function dateParam(name: string, value: string | undefined, fallback: Date): Date {
  if (value === undefined) return fallback;
  const at = parseDate(value);
  if (at === null)
    throw invalid(name, 'must be an ISO 8601 date (2026-01-31) or date-time with an offset (2026-01-31T12:00:00Z)');
  return at;
}

/** A whole number of days from `min` to `max` given as a query string; `invalid` naming the field otherwise. */
function daysParam(name: string, value: string, min: number, max: number, also = ''): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max)
    throw invalid(name, `must be ${also}a whole number from ${min} to ${max}`);
  return n;
}

/** The proposed fields of a policy impact query: each one absent keeps the tenant's current value. */
function proposedPolicy(q: {
  enforcement?: Policy['enforcement'];
  grace_days?: string;
  escalate_after_days?: string;
}): Partial<Policy> {
  const patch: Partial<Policy> = {};
  if (q.enforcement !== undefined) patch.enforcement = q.enforcement;
  if (q.grace_days !== undefined) patch.grace_days = daysParam('grace_days', q.grace_days, 0, MAX_GRACE_DAYS);
  if (q.escalate_after_days !== undefined) {
    patch.escalate_after_days =
      q.escalate_after_days === 'none'
        ? null
        : daysParam('escalate_after_days', q.escalate_after_days, 1, MAX_ESCALATE_AFTER_DAYS, 'none or ');
  }
  return patch;
}

const amounts = (list: CurrencyAmount[]) => list.map((a) => ({ currency: a.currency, amount: a.amount }));

function present(f: Figures) {
  return {
    at_risk: { count: f.atRisk.count, amounts: amounts(f.atRisk.amounts) },
    recovered: {
      ended: f.recovered.ended,
      recovered: f.recovered.recovered,
      rate: f.recovered.rate,
      amounts: amounts(f.recovered.amounts),
      periods: f.recovered.periods.map((p) => ({
        period_start: p.periodStart.toISOString(),
        ended: p.ended,
        recovered: p.recovered,
        rate: p.rate,
        amounts: amounts(p.amounts),
      })),
    },
    time_to_recover: { median_seconds: f.timeToRecover.medianSeconds, p90_seconds: f.timeToRecover.p90Seconds },
    outcomes: f.outcomes,
    decline_mix: f.declineMix,
    cohorts: f.cohorts.map((c) => ({
      month: c.month.toISOString(),
      started: c.started,
      recovered: c.recovered,
      rate: c.rate,
    })),
    links: {
      opened: f.links.opened,
      recovered_after_open: f.links.recoveredAfterOpen,
      median_seconds_to_payment: f.links.medianSecondsToPayment,
      periods: f.links.periods.map((p) => ({
        period_start: p.periodStart.toISOString(),
        opened: p.opened,
        recovered_after_open: p.recoveredAfterOpen,
        median_seconds_to_payment: p.medianSecondsToPayment,
      })),
    },
  };
}

export async function analyticsRoutes(app: App, opts: AnalyticsRoutesOptions): Promise<void> {
  const { audience, analytics } = opts;
  app.get(
    '/analytics/recovery',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        ...doc(
          audience,
          'getRecoveryAnalytics',
          'Recovery analytics: at risk now, recovered by period, time to recover, outcomes, decline mix and monthly cohorts',
          'analytics',
        ),
        params: paramsOf(audience, {}),
        querystring: RecoveryQuery,
        response: { 200: RecoveryAnalytics, ...ERRORS },
      },
    },
    async (req) => {
      const q = req.query;
      const to = dateParam('to', q.to, new Date(opts.now()));
      const from = dateParam('from', q.from, new Date(to.getTime() - DEFAULT_RANGE_DAYS * DAY_MS));
      if (from.getTime() >= to.getTime()) throw invalid('from', 'must be before to');
      if (to.getTime() - from.getTime() > MAX_ANALYTICS_RANGE_DAYS * DAY_MS)
        throw invalid('from', `the range is at most ${MAX_ANALYTICS_RANGE_DAYS} days`);
      const granularity = q.granularity ?? 'month';
      const figures = await analytics.recoveryAnalytics(tenantOf(req).id, { from, to, granularity });
      return { from: from.toISOString(), to: to.toISOString(), granularity, ...present(figures) };
    },
  );

  app.get(
    '/analytics/policy-impact',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        ...doc(
          audience,
          'getPolicyImpact',
          'What a proposed policy would answer now against the current one: warnings, lockouts, customers newly gated and released',
          'analytics',
        ),
        params: paramsOf(audience, {}),
        querystring: PolicyImpactQuery,
        response: { 200: PolicyImpact, ...ERRORS },
      },
    },
    async (req) => {
      const patch = proposedPolicy(req.query);
      const at = new Date(opts.now());
      const impact = await analytics.policyImpact(tenantOf(req).id, patch, at);
      return {
        policy: impact.proposedPolicy,
        current: impact.current,
        proposed: impact.proposed,
        newly_gated: impact.newlyGated,
        released: impact.released,
        at: at.toISOString(),
      };
    },
  );
}

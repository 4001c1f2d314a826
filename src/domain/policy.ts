import { ENFORCEMENTS } from './types.js';
import type { Enforcement, SubscriberStatus } from './types.js';
import type { UnresolvedState } from './stripe/fold.js';
import { noticesProblem, NOTICE_KINDS } from './notices.js';
import type { NoticeKind } from './notices.js';

export { ENFORCEMENTS };
export type { Enforcement };

/**
 * A tenant's dunning policy (docs/reference.md#the-dunning-policy): how the statuses derived from
 * Stripe's events (docs/reference.md#statuses-and-their-derivation) are answered. Pure: the store computes a customer's answer with it at
 * every write, and the lookup compares its clock with the `lockoutAt` it gives.
 */

export const MAX_GRACE_DAYS = 60;
export const MAX_ESCALATE_AFTER_DAYS = 120;
const DAY_MS = 86_400_000;

export interface Policy {
  enforcement: Enforcement;
  /** 0 to 60: a derived lockout is answered `warning` until the episode's dunning start plus this. */
  grace_days: number;
  /** Null or 1 to 120: a warning still unresolved this long after its dunning start is answered `lockout`. */
  escalate_after_days: number | null;
  /**
   * The notices an active subscriber's answer may carry (docs/notices.md); none by default.
   * They never change a status, so the derivation does not read them. Absent: none.
   */
  notices?: NoticeKind[];
}

/** A policy as a tenant holds it: its notices always said. */
export type TenantPolicy = Policy & { notices: NoticeKind[] };

export const DEFAULT_POLICY: Readonly<TenantPolicy> = Object.freeze({
  enforcement: 'gate',
  grace_days: 0,
  escalate_after_days: null,
  notices: Object.freeze([]) as unknown as NoticeKind[],
});

/** Why a scheduled lockout happens: a grace that ends, or an escalation that falls due. */
export const POLICY_RULES = ['grace_ended', 'escalated', 'policy_changed'] as const;
export type PolicyRule = (typeof POLICY_RULES)[number];
/** The rules a scheduled lockout can have (a change of policy schedules none). */
export type ScheduledRule = Exclude<PolicyRule, 'policy_changed'>;

/** Null when `value` is a valid (partial) policy; else the field at fault and why. */
export function policyProblem(value: unknown): string | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'policy: must be an object';
  for (const [key, v] of Object.entries(value)) {
    if (key === 'enforcement') {
      if (typeof v !== 'string' || !(ENFORCEMENTS as readonly string[]).includes(v))
        return `policy.enforcement: must be one of ${ENFORCEMENTS.join(', ')}`;
    } else if (key === 'grace_days') {
      if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > MAX_GRACE_DAYS)
        return `policy.grace_days: must be a whole number from 0 to ${MAX_GRACE_DAYS}`;
    } else if (key === 'escalate_after_days') {
      if (v !== null && (!Number.isInteger(v) || (v as number) < 1 || (v as number) > MAX_ESCALATE_AFTER_DAYS)) {
        return `policy.escalate_after_days: must be null or a whole number from 1 to ${MAX_ESCALATE_AFTER_DAYS}`;
      }
    } else if (key === 'notices') {
      const problem = noticesProblem(v);
      if (problem !== null) return problem;
    } else {
      return `policy.${key}: is not a known field (enforcement, grace_days, escalate_after_days, notices: ${NOTICE_KINDS.join(', ')})`;
    }
  }
  return null;
}

/** An unresolved episode as the policy sees it. */
export interface PolicyEpisode {
  state: UnresolvedState;
  /** The first event of its current unresolved run; null when unknown (rows older than the policy). */
  dunningStartMs: number | null;
}

/** An episode's answer: its answered state and, while `warning`, when it becomes `lockout`. */
export interface EpisodeAnswer {
  state: UnresolvedState;
  lockoutAtMs: number | null;
  rule: ScheduledRule | null;
}

/**
 * Grace and escalation for one episode at `nowMs` (enforcement is applied to the customer).
 * An episode whose dunning start is unknown is answered as derived: no grace is invented for
 * a lockout that began before the policy could know when.
 */
export function answerEpisode(e: PolicyEpisode, policy: Policy, nowMs: number): EpisodeAnswer {
  const start = e.dunningStartMs;
  if (e.state === 'lockout') {
    if (policy.grace_days > 0 && start !== null) {
      const endsMs = start + policy.grace_days * DAY_MS;
      if (nowMs < endsMs) return { state: 'warning', lockoutAtMs: endsMs, rule: 'grace_ended' };
    }
    return { state: 'lockout', lockoutAtMs: null, rule: null };
  }
  if (policy.escalate_after_days !== null && start !== null) {
    const dueMs = start + policy.escalate_after_days * DAY_MS;
    if (nowMs >= dueMs) return { state: 'lockout', lockoutAtMs: null, rule: null };
    return { state: 'warning', lockoutAtMs: dueMs, rule: 'escalated' };
  }
  return { state: 'warning', lockoutAtMs: null, rule: null };
}

/** What a customer is answered. */
export interface Answer {
  status: SubscriberStatus;
  /** While `warning`: the earliest scheduled lockout; null otherwise. */
  lockoutAtMs: number | null;
  /** The rule of that scheduled lockout. */
  rule: ScheduledRule | null;
  /** The index (in the episodes given) of the worst answered episode; null with none unresolved or under an override. */
  worst: number | null;
}

const SEVERITY: Readonly<Record<SubscriberStatus, number>> = { active: 0, warning: 1, lockout: 2 };

/** `banner_only` and `monitor` on an answered status (grace and escalation come first). */
function enforce(status: SubscriberStatus, enforcement: Enforcement): SubscriberStatus {
  if (enforcement === 'monitor') return 'active';
  if (enforcement === 'banner_only' && status === 'lockout') return 'warning';
  return status;
}

/**
 * The customer's answer: with an override, the override's status after enforcement (grace
 * and escalation do not touch an admin's choice); else the most severe answered state among
 * its unresolved episodes (the earlier in `episodes` among equals: callers pass the derived
 * worst first), with the earliest scheduled lockout. Only `gate` schedules lockouts: under
 * `banner_only` and `monitor` none ever comes.
 */
export function answerCustomer(
  episodes: readonly PolicyEpisode[],
  override: SubscriberStatus | null,
  policy: Policy,
  nowMs: number,
): Answer {
  if (override !== null)
    return { status: enforce(override, policy.enforcement), lockoutAtMs: null, rule: null, worst: null };
  let status: SubscriberStatus = 'active';
  let worst: number | null = null;
  let lockoutAtMs: number | null = null;
  let rule: Answer['rule'] = null;
  episodes.forEach((e, i) => {
    const a = answerEpisode(e, policy, nowMs);
    if (worst === null || SEVERITY[a.state] > SEVERITY[status]) {
      status = a.state;
      worst = i;
    }
    if (a.lockoutAtMs !== null && (lockoutAtMs === null || a.lockoutAtMs < lockoutAtMs)) {
      lockoutAtMs = a.lockoutAtMs;
      rule = a.rule;
    }
  });
  const answered = enforce(status, policy.enforcement);
  if (answered !== 'warning' || policy.enforcement !== 'gate')
    return { status: answered, lockoutAtMs: null, rule: null, worst };
  return { status: answered, lockoutAtMs, rule, worst };
}

/** `lockout_at` as the contract writes it: RFC 3339, UTC, whole seconds. */
export function formatLockoutAt(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** How many customers are answered `warning` and `lockout`. */
export interface GateCounts {
  warning: number;
  lockout: number;
}

/** What a proposed policy would change, against the current one, at one instant. */
export interface PolicyImpactCounts {
  current: GateCounts;
  proposed: GateCounts;
  /** Answered `lockout` under the proposed policy and not under the current one. */
  newlyGated: number;
  /** Answered `lockout` under the current policy and not under the proposed one. */
  released: number;
}

/**
 * The dunning starts at which an episode's answer under `policy` at `nowMs` turns
 * (`answerEpisode`), ascending: a lockout whose start is at or before `nowMs - grace` is past
 * its grace, a warning whose start is at or before `nowMs - escalation` has escalated. Between
 * two of them, in (c[k-1], c[k]], and after the last, the answer is the same for every start.
 */
export function dunningStartCutoffs(policy: Policy, nowMs: number): number[] {
  const cutoffs: number[] = [];
  if (policy.grace_days > 0) cutoffs.push(nowMs - policy.grace_days * DAY_MS);
  if (policy.escalate_after_days !== null) cutoffs.push(nowMs - policy.escalate_after_days * DAY_MS);
  return cutoffs.sort((a, b) => a - b);
}

/**
 * An unresolved episode as the impact of a policy sees it: its state, and where its dunning
 * start falls among the tally's `cutoffs` (how many lie before it; null: unknown).
 */
export interface EpisodeInterval {
  state: UnresolvedState;
  interval: number | null;
}

/**
 * Counts what the current and a proposed policy answer at `nowMs` (docs/tenant-api.md,
 * policy impact), through `answerCustomer`, as every write would answer the customers, so
 * that the figures cannot disagree with the statuses the policy would give.
 *
 * Customers come one by one (`add`) or, from the store, many alike at once (`addAlike`): an
 * answer changes with a dunning start only at the `cutoffs` of both policies, and a
 * customer's status is the worst of its episodes' answers, so customers with the same
 * override, or the same set of (state, interval of start), are answered alike. Each such
 * group is answered once, with one start of each interval standing for all of them.
 */
export class PolicyImpactTally {
  /** Both policies' cutoffs, ascending, each once. */
  readonly cutoffs: readonly number[];
  private readonly counts: PolicyImpactCounts = {
    current: { warning: 0, lockout: 0 },
    proposed: { warning: 0, lockout: 0 },
    newlyGated: 0,
    released: 0,
  };

  constructor(
    private readonly current: Policy,
    private readonly proposed: Policy,
    private readonly nowMs: number,
  ) {
    this.cutoffs = [...new Set([...dunningStartCutoffs(current, nowMs), ...dunningStartCutoffs(proposed, nowMs)])].sort(
      (a, b) => a - b,
    );
  }

  /** Where a dunning start falls among `cutoffs`: how many lie before it (null: unknown). */
  interval(startMs: number | null): number | null {
    return startMs === null ? null : this.cutoffs.filter((c) => startMs > c).length;
  }

  /** One customer: its unresolved episodes, and the status of its override (null: none). */
  add(episodes: readonly PolicyEpisode[], override: SubscriberStatus | null): void {
    this.count(episodes, override, 1);
  }

  /** `n` customers with the same override (null: none) or else the same episodes, by interval of start. */
  addAlike(override: SubscriberStatus | null, episodes: readonly EpisodeInterval[], n: number): void {
    const last = this.cutoffs.at(-1) ?? this.nowMs;
    // A start of each interval: its upper cutoff, or just after the last one.
    const start = (k: number | null): number | null =>
      k === null ? null : k < this.cutoffs.length ? (this.cutoffs[k] ?? last) : last + 1;
    this.count(
      episodes.map((e) => ({ state: e.state, dunningStartMs: start(e.interval) })),
      override,
      n,
    );
  }

  private count(episodes: readonly PolicyEpisode[], override: SubscriberStatus | null, n: number): void {
    if (n <= 0) return;
    const before = answerCustomer(episodes, override, this.current, this.nowMs).status;
    const after = answerCustomer(episodes, override, this.proposed, this.nowMs).status;
    if (before !== 'active') this.counts.current[before] += n;
    if (after !== 'active') this.counts.proposed[after] += n;
    if (after === 'lockout' && before !== 'lockout') this.counts.newlyGated += n;
    if (before === 'lockout' && after !== 'lockout') this.counts.released += n;
  }

  result(): PolicyImpactCounts {
    const c = this.counts;
    return { current: { ...c.current }, proposed: { ...c.proposed }, newlyGated: c.newlyGated, released: c.released };
  }
}

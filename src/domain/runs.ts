/**
 * Dunning runs, for the recovery analytics (docs/api.md, recovery analytics). An episode row
 * keeps only its current run (`dunningStartedAtMs`) and its last resolution, so a customer
 * who failed, paid and failed again would lose the first run. Each write therefore says, as
 * part of its effect, which run of an episode it opens, extends or ends; the store keeps one
 * row per run (migration 015). Pure: computed from the episodes before and after the write.
 */

/** How a run ended: the resolutions of docs/stripe.md, or the customer removed while in dunning. */
export const RUN_OUTCOMES = ['paid', 'voided', 'subscription_ended', 'removed'] as const;
export type RunOutcome = (typeof RUN_OUTCOMES)[number];

/**
 * The decline classes of a run, from the reasons that put an episode in dunning, least
 * severe first: a soft decline Stripe retries, a payment that needs the customer's
 * authentication, retries exhausted, a hard decline (a new payment method is needed). A
 * run's class is the worst of its events'.
 */
export const RUN_DECLINE_CLASSES = ['soft', 'authentication', 'exhausted', 'hard'] as const;
export type RunDeclineClass = (typeof RUN_DECLINE_CLASSES)[number];

const CLASS_OF_REASON: Readonly<Record<string, RunDeclineClass>> = {
  soft_decline: 'soft',
  first_payment_failed: 'soft',
  subscription_past_due: 'soft',
  payment_action_required: 'authentication',
  retries_exhausted: 'exhausted',
  subscription_unpaid: 'exhausted',
  hard_decline: 'hard',
};

/** The periods the recovery analytics bucket by (ISO weeks from Monday, calendar months; UTC). */
export const ANALYTICS_GRANULARITIES = ['week', 'month'] as const;
export type AnalyticsGranularity = (typeof ANALYTICS_GRANULARITIES)[number];

/** The longest range the recovery analytics answer, in days: two years. */
export const MAX_ANALYTICS_RANGE_DAYS = 731;

/** The class of an unresolved episode's reason; a reason of no class is a soft one. */
export function declineClassOf(reason: string): RunDeclineClass {
  return CLASS_OF_REASON[reason] ?? 'soft';
}

/** The worse of two classes. */
export function worseClass(a: RunDeclineClass, b: RunDeclineClass): RunDeclineClass {
  return RUN_DECLINE_CLASSES.indexOf(a) >= RUN_DECLINE_CLASSES.indexOf(b) ? a : b;
}

/** The outcome a resolution's reason gives its run. */
export function outcomeOf(reason: string): RunOutcome {
  return reason === 'voided' || reason === 'subscription_ended' ? reason : 'paid';
}

/**
 * One change to the runs of an episode:
 * - `open`: the episode's open run is as given (created if it has none): its start (an older
 *   failure may move it earlier), its invoice, and the class of this event, which the store
 *   keeps when worse than the run's;
 * - `close`: the episode's open run ends at `endedAtMs` with `outcome` (kept as a closed run
 *   from `startedAtMs` when none is open).
 */
export type RunChange =
  | { kind: 'open'; episode: string; startedAtMs: number; invoiceId: string | null; declineClass: RunDeclineClass }
  | {
      kind: 'close';
      episode: string;
      startedAtMs: number;
      endedAtMs: number;
      outcome: RunOutcome;
      invoiceId: string | null;
    };

/** What a run change reads of an episode (domain/effect.ts, StoredEpisode). */
export interface RunEpisode {
  key: string;
  state: 'warning' | 'lockout' | 'resolved';
  reason: string;
  position: { atMs: number };
  dunningStartedAtMs: number | null;
  resolvedAtMs: number | null;
  invoiceId: string | null;
}

const unresolved = (e: RunEpisode | undefined): e is RunEpisode => e !== undefined && e.state !== 'resolved';

/** The start of an unresolved episode's run; a row from before runs were kept: its latest event. */
const startOf = (e: RunEpisode): number => e.dunningStartedAtMs ?? e.position.atMs;

/**
 * The run changes of one write: `before` the episodes as read, `changed` those the write sets,
 * `removed` the keys it removes at `removedAtMs`. `endedBy` names, per episode, the reason of
 * an older resolution that the write learnt of inside the current run (the run before it
 * ended then, and the current one began later).
 */
export function runChanges(
  before: readonly RunEpisode[],
  changed: readonly RunEpisode[],
  removed: readonly string[] = [],
  removedAtMs: number | null = null,
  endedBy: ReadonlyMap<string, string> = new Map(),
): RunChange[] {
  const was = new Map(before.map((e) => [e.key, e]));
  const out: RunChange[] = [];
  for (const key of removed) {
    const b = was.get(key);
    if (unresolved(b) && removedAtMs !== null)
      out.push({
        kind: 'close',
        episode: key,
        startedAtMs: startOf(b),
        endedAtMs: removedAtMs,
        outcome: 'removed',
        invoiceId: b.invoiceId,
      });
  }
  for (const a of changed) {
    const b = was.get(a.key);
    if (a.state !== 'resolved') {
      const reason = endedBy.get(a.key);
      if (unresolved(b) && reason !== undefined && a.resolvedAtMs !== null && a.resolvedAtMs !== b.resolvedAtMs) {
        // An older resolution split the run: the first part ended then.
        out.push({
          kind: 'close',
          episode: a.key,
          startedAtMs: startOf(b),
          endedAtMs: a.resolvedAtMs,
          outcome: outcomeOf(reason),
          invoiceId: b.invoiceId,
        });
      }
      out.push({
        kind: 'open',
        episode: a.key,
        startedAtMs: startOf(a),
        invoiceId: a.invoiceId,
        declineClass: declineClassOf(a.reason),
      });
    } else if (unresolved(b)) {
      out.push({
        kind: 'close',
        episode: a.key,
        startedAtMs: startOf(b),
        endedAtMs: a.resolvedAtMs ?? a.position.atMs,
        outcome: outcomeOf(a.reason),
        invoiceId: a.invoiceId ?? b.invoiceId,
      });
    }
  }
  return out;
}

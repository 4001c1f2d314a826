import { deriveChange } from '../domain/stripe/derive.js';
import type { StripeEventLike } from '../domain/stripe/derive.js';
import { STRIPE_EVENT_OUTCOMES, zeroOutcomeCounts } from '../domain/stripe/outcomes.js';
import { zeroStatusCounts } from '../domain/types.js';
import type { SubscriberStatus } from '../domain/types.js';
import type { ReplayAnswerView } from './client.js';

type Outcomes = ReplayAnswerView['outcomes'];
type Status = SubscriberStatus;

export interface CustomerChange {
  processor_customer_id: string;
  /** null: unknown (no record). */
  from: Status | null;
  to: Status | null;
  reason: string | null;
}

/** What a tally holds, as JSON: the summary a command prints, and what a resumed run picks up. */
export interface TallyState {
  outcomes: Outcomes;
  /** Per customer: its status before the first batch that named it, and after the last. */
  customers: Record<string, { from: Status | null; to: Status | null; reason: string | null }>;
  /** `customer episode` of every episode an applied event opened or moved. */
  episodes: string[];
}

export interface TallySummary {
  customers_seen: number;
  episodes_created: number;
  outcomes: Outcomes;
  /** Customers by their status after the run; `unknown`: no record, so the lookup answers active. */
  statuses: Record<Status | 'unknown', number>;
  changes: CustomerChange[];
}

function isEvent(value: unknown): value is StripeEventLike {
  return typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string';
}

/** The episode an applied event moved, when the event says which (a decline says only through its invoice). */
function episodeOf(event: unknown): string | null {
  if (!isEvent(event) || typeof event.data !== 'object' || event.data === null) return null;
  const derivation = deriveChange(event);
  if (derivation.kind !== 'change') return null;
  const change = derivation.change;
  if (change.kind === 'episode') return `${derivation.customerId} ${change.episode}`;
  if (change.kind === 'decline')
    return `${derivation.customerId} ${change.decline.invoiceId ?? change.decline.paymentIds[0] ?? ''}`;
  return null;
}

/** The running account of an import or a replay: batch answers in, one summary out. */
export class ImportTally {
  private readonly state: TallyState;

  constructor(from?: TallyState) {
    // A state saved before an outcome existed counts it from zero.
    this.state = from
      ? { ...from, outcomes: { ...zeroOutcomeCounts(), ...from.outcomes } }
      : { outcomes: zeroOutcomeCounts(), customers: {}, episodes: [] };
  }

  /** One batch: the events sent, in order, and the service's answer (an older service's lacks the newer outcomes). */
  add(events: readonly unknown[], answer: ReplayAnswerView): void {
    for (const key of STRIPE_EVENT_OUTCOMES)
      this.state.outcomes[key] += (answer.outcomes as Partial<Outcomes>)[key] ?? 0;
    const episodes = new Set(this.state.episodes);
    answer.results.forEach((outcome, i) => {
      const episode = outcome === 'applied' ? episodeOf(events[i]) : null;
      if (episode !== null) episodes.add(episode);
    });
    this.state.episodes = [...episodes];
    for (const c of answer.customers) {
      const seen = this.state.customers[c.processor_customer_id];
      this.state.customers[c.processor_customer_id] = {
        from: seen ? seen.from : c.status_before,
        to: c.status,
        reason: c.reason,
      };
    }
  }

  get customersSeen(): number {
    return Object.keys(this.state.customers).length;
  }

  toJSON(): TallyState {
    return this.state;
  }

  summary(): TallySummary {
    const statuses = { ...zeroStatusCounts(), unknown: 0 };
    const changes: CustomerChange[] = [];
    for (const [id, c] of Object.entries(this.state.customers).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      statuses[c.to ?? 'unknown'] += 1;
      if (c.from !== c.to) changes.push({ processor_customer_id: id, from: c.from, to: c.to, reason: c.reason });
    }
    return {
      customers_seen: this.customersSeen,
      episodes_created: this.state.episodes.length,
      outcomes: { ...this.state.outcomes },
      statuses,
      changes,
    };
  }
}

/** The summary's lines for a person: counts first, then the customers whose status changed. */
export function formatTally(s: TallySummary, dryRun: boolean): string[] {
  const would = dryRun ? ' (would be)' : '';
  const o = s.outcomes;
  const lines = [
    `customers seen:    ${s.customers_seen}`,
    `episodes created:  ${s.episodes_created}${would}`,
    `events:            ${STRIPE_EVENT_OUTCOMES.map((k) => `${k} ${o[k]}`).join(', ')}`,
    `statuses:          lockout ${s.statuses.lockout}, warning ${s.statuses.warning}, active ${s.statuses.active}, unknown ${s.statuses.unknown}${would}`,
  ];
  if (s.changes.length > 0) {
    lines.push(`${dryRun ? 'would change' : 'changed'}:`);
    const name = (st: string | null) => st ?? 'unknown';
    for (const c of s.changes.slice(0, 50))
      lines.push(
        `  ${c.processor_customer_id}: ${name(c.from)} -> ${name(c.to)}${c.reason === null ? '' : ` (${c.reason})`}`,
      );
    if (s.changes.length > 50) lines.push(`  ... and ${s.changes.length - 50} more (--json lists them all)`);
  }
  return lines;
}

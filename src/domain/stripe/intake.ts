/**
 * What reaches a tenant's Stripe intake, counted per tenant and UTC day (migration 016,
 * docs/operations.md, Stripe intake counters): `received`, a webhook delivery whose signature
 * verified, whatever came of it (a livemode mismatch included); `refused_signature`, one
 * refused `400 invalid_signature` (no signing secret, no header, a bad or stale signature);
 * `refused_livemode`, a verified delivery of the other mode than the tenant's; `replayed`,
 * each event the operator's replay took (what `dunwall stripe sync` sends), dry runs aside.
 */
export const STRIPE_INTAKE_KINDS = ['received', 'refused_signature', 'refused_livemode', 'replayed'] as const;
export type StripeIntakeKind = (typeof STRIPE_INTAKE_KINDS)[number];

/** One (tenant, day, kind) of counts: how many, and the last of them. */
export interface StripeIntakeCount {
  tenantId: number;
  /** The UTC day, YYYY-MM-DD. */
  day: string;
  kind: StripeIntakeKind;
  count: number;
  lastAt: Date;
}

const DAY_MS = 86_400_000;

/** The UTC day of an instant, YYYY-MM-DD. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Midnight UTC of the day `days` days before the day of `ms` (0: that day's own midnight). */
export function utcDayStart(ms: number, daysBefore = 0): Date {
  return new Date((Math.floor(ms / DAY_MS) - daysBefore) * DAY_MS);
}

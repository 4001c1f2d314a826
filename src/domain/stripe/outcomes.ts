/**
 * What one Stripe event did, whether it came by the webhook or a replay: the closed
 * vocabulary of the webhook's answer, the replay's counts, the metrics and the CLI's tallies.
 */
export const STRIPE_EVENT_OUTCOMES = [
  'applied',
  'stale',
  'ignored',
  'pending',
  'duplicate',
  'irrelevant',
  'livemode_mismatch',
] as const;
export type StripeEventOutcomeName = (typeof STRIPE_EVENT_OUTCOMES)[number];

export const STRIPE_EVENT_OUTCOME_DESCRIPTIONS: Readonly<Record<StripeEventOutcomeName, string>> = {
  applied: 'the event set its episode',
  stale: 'its episode has a later event, no change',
  ignored: 'nothing to change',
  pending: "a decline kept until an invoice event links it (a one-off payment's never gates)",
  duplicate: 'seen before',
  irrelevant: 'not a type Dunwall reads',
  livemode_mismatch:
    "the event's livemode is not the tenant's (a test event for a live tenant, or the reverse): not kept, no change",
};

/** One count per outcome, all zero. */
export function zeroOutcomeCounts(): Record<StripeEventOutcomeName, number> {
  return Object.fromEntries(STRIPE_EVENT_OUTCOMES.map((o) => [o, 0])) as Record<StripeEventOutcomeName, number>;
}

/**
 * A tenant's mode (docs/api.md, test mode): `true` takes Stripe's live events only, `false`
 * its test events only, `null` both (the default, and every tenant made before the setting).
 */
export type TenantLivemode = boolean | null;

/**
 * Whether the event belongs to the other mode than the tenant's. An event that does not say
 * its mode (a replayed export without the field; Stripe always sends it) is taken, as a
 * tenant of either mode would take it: refusing it could miss a gate.
 */
export function isLivemodeMismatch(tenant: TenantLivemode, event: { livemode?: unknown }): boolean {
  return tenant !== null && typeof event.livemode === 'boolean' && event.livemode !== tenant;
}

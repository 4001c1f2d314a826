/**
 * Decline codes after which Stripe does not retry without a new payment method
 * (docs/stripe.md, statuses from dunning episodes). Every other decline is soft.
 */
export const HARD_DECLINE_CODES: ReadonlySet<string> = new Set([
  'incorrect_number',
  'lost_card',
  'pickup_card',
  'stolen_card',
  'revocation_of_authorization',
  'revocation_of_all_authorizations',
  'authentication_required',
  'highest_risk_level',
  'transaction_not_allowed',
  'fraudulent',
  'do_not_try_again',
  'stop_payment_order',
  'merchant_blacklist',
  'invalid_account',
  'expired_card',
]);

export const DECLINE_CLASSES = ['hard', 'soft'] as const;
export type DeclineClass = (typeof DECLINE_CLASSES)[number];

export interface Decline {
  class: DeclineClass;
  /** The code that decided the class: the first one present, in the order given. */
  code: string | null;
}

/**
 * Classifies a decline from its codes in order of precedence (`decline_code`, then `code`,
 * then a charge's `outcome.reason` and `failure_code`): the first present decides. No code
 * at all is a soft decline, so that a decline never gates without a reason to.
 */
export function classifyDecline(...codes: ReadonlyArray<string | null | undefined>): Decline {
  const code = codes.find((c): c is string => typeof c === 'string' && c !== '') ?? null;
  return { class: code !== null && HARD_DECLINE_CODES.has(code) ? 'hard' : 'soft', code };
}

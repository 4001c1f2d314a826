import { describe, expect, it } from 'vitest';
import { HARD_DECLINE_CODES, classifyDecline } from '../../src/domain/stripe/declines.js';

/** Stripe's card decline codes (its "Decline codes" reference), and the Radar outcome reason the contract names. */
const STRIPE_DECLINE_CODES: Record<string, 'hard' | 'soft'> = {
  approve_with_id: 'soft',
  authentication_required: 'hard',
  call_issuer: 'soft',
  card_not_supported: 'soft',
  card_velocity_exceeded: 'soft',
  currency_not_supported: 'soft',
  do_not_honor: 'soft',
  do_not_try_again: 'hard',
  duplicate_transaction: 'soft',
  expired_card: 'hard',
  fraudulent: 'hard',
  generic_decline: 'soft',
  highest_risk_level: 'hard',
  incorrect_cvc: 'soft',
  incorrect_number: 'hard',
  incorrect_pin: 'soft',
  incorrect_zip: 'soft',
  insufficient_funds: 'soft',
  invalid_account: 'hard',
  invalid_amount: 'soft',
  invalid_cvc: 'soft',
  invalid_expiry_month: 'soft',
  invalid_expiry_year: 'soft',
  invalid_number: 'soft',
  invalid_pin: 'soft',
  issuer_not_available: 'soft',
  lost_card: 'hard',
  merchant_blacklist: 'hard',
  new_account_information_available: 'soft',
  no_action_taken: 'soft',
  not_permitted: 'soft',
  offline_pin_required: 'soft',
  online_or_offline_pin_required: 'soft',
  pickup_card: 'hard',
  pin_try_exceeded: 'soft',
  processing_error: 'soft',
  reenter_transaction: 'soft',
  restricted_card: 'soft',
  revocation_of_all_authorizations: 'hard',
  revocation_of_authorization: 'hard',
  security_violation: 'soft',
  service_not_allowed: 'soft',
  stolen_card: 'hard',
  stop_payment_order: 'hard',
  testmode_decline: 'soft',
  transaction_not_allowed: 'hard',
  try_again_later: 'soft',
  withdrawal_count_exceeded: 'soft',
};

describe('classifyDecline', () => {
  it.each(Object.entries(STRIPE_DECLINE_CODES))('%s is a %s decline', (code, expected) => {
    expect(classifyDecline(code)).toEqual({ class: expected, code });
  });

  it('covers every hard code of the contract', () => {
    const hard = Object.entries(STRIPE_DECLINE_CODES)
      .filter(([, c]) => c === 'hard')
      .map(([code]) => code);
    expect(new Set(hard)).toEqual(HARD_DECLINE_CODES);
  });

  it('lets the first code present decide: decline_code, then code, then the charge fields', () => {
    expect(classifyDecline('generic_decline', 'expired_card')).toEqual({ class: 'soft', code: 'generic_decline' });
    expect(classifyDecline(null, 'expired_card')).toEqual({ class: 'hard', code: 'expired_card' });
    expect(classifyDecline(undefined, '', 'stolen_card', 'card_declined')).toEqual({
      class: 'hard',
      code: 'stolen_card',
    });
    expect(classifyDecline('card_declined')).toEqual({ class: 'soft', code: 'card_declined' });
  });

  it('treats a decline with no code, or an unknown one, as soft', () => {
    expect(classifyDecline()).toEqual({ class: 'soft', code: null });
    expect(classifyDecline(null, undefined)).toEqual({ class: 'soft', code: null });
    expect(classifyDecline('some_future_code')).toEqual({ class: 'soft', code: 'some_future_code' });
  });
});

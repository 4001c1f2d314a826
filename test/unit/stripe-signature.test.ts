import Stripe from 'stripe';
import { describe, expect, it } from 'vitest';
import {
  checkStripeDelivery,
  parseSignatureHeader,
  signStripePayload,
  verifyStripeDelivery,
  STRIPE_SIGNATURE_TOLERANCE_S,
} from '../../src/domain/stripe/signature.js';

/** Headers made by Stripe's own library (`generateTestHeaderString`), as Stripe signs deliveries. */
const SECRET = 'whsec_signature_test_0123456789abcdef';
const OTHER = 'whsec_other_secret_0123456789abcdefgh';
const T = 1_790_000_000;
const payload = JSON.stringify({ id: 'evt_1', object: 'event', type: 'invoice.payment_failed', created: T });
const signedBy = (secret: string, timestamp = T, body = payload) =>
  Stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp });
const raw = Buffer.from(payload);

describe('Stripe-Signature', () => {
  it('verifies what Stripe signed, with the current secret or the one being replaced', () => {
    expect(verifyStripeDelivery(raw, signedBy(SECRET), [SECRET], T * 1000)).toMatchObject({ id: 'evt_1' });
    expect(verifyStripeDelivery(raw, signedBy(SECRET), [OTHER, SECRET], T * 1000)).toMatchObject({ id: 'evt_1' });
    expect(verifyStripeDelivery(raw, signedBy(SECRET), [OTHER], T * 1000)).toBeUndefined();
    expect(verifyStripeDelivery(raw, signedBy(SECRET), [], T * 1000)).toBeUndefined();
  });

  it('accepts any of several v1 signatures (a secret rolling over at Stripe) and ignores v0', () => {
    const ours = /v1=([0-9a-f]{64})/.exec(signedBy(SECRET))?.[1];
    const theirs = /v1=([0-9a-f]{64})/.exec(signedBy(OTHER))?.[1];
    expect(
      verifyStripeDelivery(raw, `t=${T},v1=${theirs},v1=${ours},v0=${'0'.repeat(64)}`, [SECRET], T * 1000),
    ).toMatchObject({ id: 'evt_1' });
    expect(verifyStripeDelivery(raw, `t=${T},v0=${ours}`, [SECRET], T * 1000)).toBeUndefined();
  });

  it('refuses a signature older than the tolerance, a changed body, a changed timestamp, and a body that is not JSON', () => {
    expect(
      verifyStripeDelivery(raw, signedBy(SECRET), [SECRET], (T + STRIPE_SIGNATURE_TOLERANCE_S) * 1000),
    ).toMatchObject({
      id: 'evt_1',
    });
    expect(
      verifyStripeDelivery(raw, signedBy(SECRET), [SECRET], (T + STRIPE_SIGNATURE_TOLERANCE_S + 1) * 1000),
    ).toBeUndefined();
    expect(verifyStripeDelivery(Buffer.from(`${payload} `), signedBy(SECRET), [SECRET], T * 1000)).toBeUndefined();
    const moved = signedBy(SECRET).replace(`t=${T}`, `t=${T + 1}`);
    expect(verifyStripeDelivery(raw, moved, [SECRET], T * 1000)).toBeUndefined();
    const notJson = 'not json';
    expect(
      verifyStripeDelivery(Buffer.from(notJson), signedBy(SECRET, T, notJson), [SECRET], T * 1000),
    ).toBeUndefined();
  });

  it('says why a delivery did not verify', () => {
    expect(checkStripeDelivery(raw, signedBy(SECRET), [OTHER], T * 1000)).toEqual({
      ok: false,
      why: 'no_matching_secret',
    });
    expect(checkStripeDelivery(raw, signedBy(SECRET), [SECRET], (T + STRIPE_SIGNATURE_TOLERANCE_S + 1) * 1000)).toEqual(
      {
        ok: false,
        why: 'timestamp_outside_tolerance',
      },
    );
    expect(checkStripeDelivery(raw, `t=${T}`, [SECRET], T * 1000)).toEqual({ ok: false, why: 'malformed_header' });
    expect(checkStripeDelivery(Buffer.from('not json'), signedBy(SECRET, T, 'not json'), [SECRET], T * 1000)).toEqual({
      ok: false,
      why: 'not_json',
    });
    expect(checkStripeDelivery(raw, signedBy(SECRET), [SECRET], T * 1000)).toMatchObject({
      ok: true,
      event: { id: 'evt_1' },
    });
  });

  it("signs a payload as Stripe's own library does", () => {
    expect(signStripePayload(payload, SECRET, T)).toBe(signedBy(SECRET));
    expect(
      Stripe.webhooks.constructEvent(
        payload,
        signStripePayload(payload, SECRET, Math.floor(Date.now() / 1000)),
        SECRET,
      ),
    ).toMatchObject({ id: 'evt_1' });
  });

  it('parses only well-formed headers', () => {
    for (const header of [
      '',
      't=',
      `v1=${'a'.repeat(64)}`,
      `t=${T}`,
      `t=abc,v1=${'a'.repeat(64)}`,
      `t=${T},v1=${'a'.repeat(63)}`,
      `t=${T},v1=${'A'.repeat(64)}`,
    ]) {
      expect(parseSignatureHeader(header), header).toBeNull();
    }
    expect(parseSignatureHeader(` t=${T} , v1=${'a'.repeat(64)} `)).toEqual({
      timestamp: T,
      v1: [Buffer.from('a'.repeat(64), 'hex')],
    });
  });
});

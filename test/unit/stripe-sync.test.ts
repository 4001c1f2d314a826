import { describe, expect, it } from 'vitest';
import { deriveChange } from '../../src/domain/stripe/derive.js';
import { invoiceSyncEvent, isDunningInvoice, subscriptionSyncEvent } from '../../src/domain/stripe/sync.js';
import {
  buildCharge,
  buildInvoice,
  buildInvoicePayment,
  buildPaymentIntent,
  buildSubscription,
} from '../helpers/stripe-standin.js';

const T = 1_790_000_000;
type Obj = Record<string, unknown>;

/** An invoice payment as the import lists it: `payment.payment_intent` expanded with its `latest_charge`. */
function expandedPayment(invoice: string, pi: Obj, charge: Obj | null, createdS: number): Obj {
  const payment = buildInvoicePayment({ invoice, paymentIntent: pi.id as string, createdS });
  return {
    ...payment,
    payment: { ...(payment.payment as Obj), payment_intent: { ...pi, latest_charge: charge ?? pi.latest_charge } },
  };
}

describe("events an import makes of today's state", () => {
  const customer = 'cus_sync1';

  it("dates an invoice's failure at its latest failed charge and keeps its decline code", () => {
    const inv = buildInvoice({
      customer,
      subscription: 'sub_1',
      attemptCount: 3,
      nextPaymentAttempt: T + 86_400,
      createdS: T - 10_000,
      finalizedS: T - 9_000,
    });
    const old = buildPaymentIntent({
      customer,
      declineCode: 'insufficient_funds',
      createdS: T - 5_000,
      chargeCreatedS: T - 5_000,
    });
    const latest = buildPaymentIntent({ customer, declineCode: 'expired_card', createdS: T - 100, chargeCreatedS: T });
    const e = invoiceSyncEvent(inv, [
      expandedPayment(inv.id as string, latest, buildCharge({ paymentIntent: latest }), T),
      expandedPayment(inv.id as string, old, buildCharge({ paymentIntent: old }), T - 5_000),
    ]);
    expect(e).toMatchObject({ id: `evt_sync_${inv.id as string}_3`, type: 'invoice.payment_failed', created: T });
    const d = deriveChange(e ?? { id: '', type: '', created: 0, data: { object: {} } });
    expect(d).toMatchObject({
      kind: 'change',
      customerId: customer,
      declineCode: 'expired_card',
      change: { episode: 'sub_1', outcome: { state: 'lockout', reason: 'hard_decline' } },
    });
    // Every payment named, so that a decline webhook links to this invoice.
    expect(d.kind === 'change' ? d.invoice?.paymentIds : []).toEqual([latest.id, old.id]);
  });

  it('an attempt that waits for the customer is payment_action_required; no charge: the payment or the finalization dates it', () => {
    const inv = buildInvoice({
      customer,
      subscription: 'sub_2',
      attemptCount: 1,
      nextPaymentAttempt: null,
      createdS: T - 100,
      finalizedS: T - 50,
    });
    const waiting = {
      ...buildPaymentIntent({ customer, createdS: T - 40 }),
      status: 'requires_action',
      last_payment_error: null,
      latest_charge: null,
    };
    expect(invoiceSyncEvent(inv, [expandedPayment(inv.id as string, waiting, null, T - 30)])).toMatchObject({
      type: 'invoice.payment_action_required',
      created: T - 30,
    });
    expect(invoiceSyncEvent(inv, [])).toMatchObject({ type: 'invoice.payment_failed', created: T - 50 });
  });

  it('only open, automatically collected, attempted invoices are in dunning', () => {
    const base = { customer, subscription: 'sub_3', createdS: T };
    expect(isDunningInvoice(buildInvoice({ ...base, attemptCount: 1 }))).toBe(true);
    expect(isDunningInvoice(buildInvoice({ ...base, attemptCount: 0 }))).toBe(false);
    expect(isDunningInvoice(buildInvoice({ ...base, attemptCount: 1, collectionMethod: 'send_invoice' }))).toBe(false);
    expect(isDunningInvoice(buildInvoice({ ...base, attemptCount: 1, status: 'paid' }))).toBe(false);
    expect(invoiceSyncEvent(buildInvoice({ ...base, attemptCount: 0 }), [])).toBeNull();
  });

  it('a past_due or unpaid subscription is the transition into it, dated no later than its latest invoice was finalized', () => {
    const latest = buildInvoice({
      customer,
      subscription: 'sub_4',
      attemptCount: 2,
      createdS: T - 500,
      finalizedS: T - 400,
    });
    const pastDue = subscriptionSyncEvent({
      ...buildSubscription({
        id: 'sub_4',
        customer,
        status: 'past_due',
        latestInvoice: latest.id as string,
        createdS: T - 90 * 86_400,
      }),
      latest_invoice: latest,
    });
    expect(pastDue).toMatchObject({
      id: `evt_sync_sub_4_past_due_${T - 400}`,
      created: T - 400,
      data: { previous_attributes: { status: 'active' } },
    });
    expect(deriveChange(pastDue ?? { id: '', type: '', created: 0, data: { object: {} } })).toMatchObject({
      change: { episode: 'sub_4', outcome: { state: 'warning', reason: 'subscription_past_due' } },
    });
    const unpaid = subscriptionSyncEvent(
      buildSubscription({ id: 'sub_5', customer, status: 'unpaid', latestInvoice: null, createdS: T - 1000 }),
    );
    expect(deriveChange(unpaid ?? { id: '', type: '', created: 0, data: { object: {} } })).toMatchObject({
      change: { outcome: { state: 'lockout', reason: 'subscription_unpaid' } },
    });
    expect(
      subscriptionSyncEvent(
        buildSubscription({ id: 'sub_6', customer, status: 'incomplete', latestInvoice: null, createdS: T }),
      ),
    ).toBeNull();
  });

  it("carries its object's livemode, so that a live or test tenant skips an object of the other mode", () => {
    const inv = buildInvoice({ customer, subscription: 'sub_7', attemptCount: 1, createdS: T });
    const sub = buildSubscription({
      id: 'sub_7',
      customer,
      status: 'past_due',
      latestInvoice: null,
      createdS: T - 1000,
    });
    expect(invoiceSyncEvent(inv, [])?.livemode).toBe(false);
    expect(invoiceSyncEvent({ ...inv, livemode: true }, [])?.livemode).toBe(true);
    expect(subscriptionSyncEvent(sub)?.livemode).toBe(false);
    expect(subscriptionSyncEvent({ ...sub, livemode: true })?.livemode).toBe(true);
    // An object that does not say its mode makes an event that does not either.
    expect(invoiceSyncEvent({ ...inv, livemode: undefined }, [])).not.toHaveProperty('livemode');
  });
});

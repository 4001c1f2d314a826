import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';
import { BASIL_API, LEGACY_API, charge, customer, event, invoice, paymentIntent, signed, subscription } from '../helpers/stripe-fixtures.js';
import type { ApiShape, StripeEventFixture } from '../helpers/stripe-fixtures.js';
import { deliver } from '../helpers/webhook.js';

const engines = await availableEngines();
const SECRET = 'whsec_test_primary_0123456789abcdef';
const SECRET_2 = 'whsec_test_rotated_0123456789abcdef';

describe.each(engines)('Stripe webhook ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant;
  let n = 0;
  const nextCustomer = () => `cus_hook${(n += 1)}`;
  const nowS = () => Math.floor(h.clock.ms / 1000);

  beforeAll(async () => {
    h = await harness(engine);
    acme = await h.createTenant('acme', { card_update_url: 'https://acme.test/card' });
    await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: SECRET });
    await h.createTenant('no-secret');
  });
  afterAll(() => h.close());

  async function send(fixture: StripeEventFixture, secret = SECRET) {
    const res = await deliver(h, 'acme', fixture, secret);
    return { status: res.statusCode, body: res.json() as { outcome?: string; code?: string } };
  }
  async function statusOf(customerId: string): Promise<string | null> {
    const res = await h.lookup('acme', { key: acme.publishable_key, customerId });
    return res.body === '{"status":"active"}' ? null : (res.json().status as string);
  }

  describe.each([LEGACY_API, BASIL_API] as ApiShape[])('CONTRACT.md section 5 rows, API %s', (api) => {
    it('charge.failed: soft decline -> warning, hard decline -> lockout', async () => {
      const soft = nextCustomer();
      expect(await send(event('charge.failed', charge(soft, { failure_code: 'card_declined', outcome_reason: 'insufficient_funds' }, api), { created: nowS(), api }))).toEqual({
        status: 200,
        body: { received: true, outcome: 'applied' },
      });
      expect(await statusOf(soft)).toBe('warning');
      const hard = nextCustomer();
      await send(event('charge.failed', charge(hard, { failure_code: 'card_declined', outcome_reason: 'stolen_card' }, api), { created: nowS(), api }));
      expect(await statusOf(hard)).toBe('lockout');
      // No outcome reason: the failure code decides.
      const expired = nextCustomer();
      await send(event('charge.failed', charge(expired, { failure_code: 'expired_card' }, api), { created: nowS(), api }));
      expect(await statusOf(expired)).toBe('lockout');
    });

    it('payment_intent.payment_failed: decline_code first, then code', async () => {
      const soft = nextCustomer();
      await send(event('payment_intent.payment_failed', paymentIntent(soft, { code: 'card_declined', decline_code: 'generic_decline' }), { created: nowS(), api }));
      expect(await statusOf(soft)).toBe('warning');
      const hard = nextCustomer();
      await send(event('payment_intent.payment_failed', paymentIntent(hard, { code: 'card_declined', decline_code: 'fraudulent' }), { created: nowS(), api }));
      expect(await statusOf(hard)).toBe('lockout');
      const byCode = nextCustomer();
      await send(event('payment_intent.payment_failed', paymentIntent(byCode, { code: 'expired_card', decline_code: null }), { created: nowS(), api }));
      expect(await statusOf(byCode)).toBe('lockout');
    });

    it('invoice.payment_failed: retries left -> warning, none left -> lockout, send_invoice never gates', async () => {
      const retrying = nextCustomer();
      await send(event('invoice.payment_failed', invoice(retrying, { next_payment_attempt: nowS() + 86_400, api }), { created: nowS(), api }));
      expect(await statusOf(retrying)).toBe('warning');
      const exhausted = nextCustomer();
      await send(event('invoice.payment_failed', invoice(exhausted, { next_payment_attempt: null, api }), { created: nowS(), api }));
      expect(await statusOf(exhausted)).toBe('lockout');
      const manual = nextCustomer();
      const res = await send(event('invoice.payment_failed', invoice(manual, { collection_method: 'send_invoice', next_payment_attempt: null, api }), { created: nowS(), api }));
      expect(res.body.outcome).toBe('ignored');
      expect(await statusOf(manual)).toBeNull();
    });

    it('invoice.payment_action_required -> warning', async () => {
      const c = nextCustomer();
      await send(event('invoice.payment_action_required', invoice(c, { next_payment_attempt: null, api }), { created: nowS(), api }));
      expect(await statusOf(c)).toBe('warning');
      const sub = (await h.admin('GET', `/tenants/acme/subscribers/${c}`)).json();
      expect(sub.reason).toBe('payment_action_required');
    });

    it('customer.subscription.updated to past_due / unpaid, and back to active', async () => {
      const c = nextCustomer();
      await send(event('customer.subscription.updated', subscription(c, 'past_due'), { created: nowS(), api, previous: { status: 'active' } }));
      expect(await statusOf(c)).toBe('warning');
      h.clock.advance(1_000);
      await send(event('customer.subscription.updated', subscription(c, 'unpaid'), { created: nowS(), api, previous: { status: 'past_due' } }));
      expect(await statusOf(c)).toBe('lockout');
      h.clock.advance(1_000);
      // An update that is not a status transition says nothing about payment.
      const noop = await send(event('customer.subscription.updated', subscription(c, 'unpaid'), { created: nowS(), api, previous: { metadata: {} } }));
      expect(noop.body.outcome).toBe('ignored');
      expect(await statusOf(c)).toBe('lockout');
      await send(event('customer.subscription.updated', subscription(c, 'active'), { created: nowS(), api, previous: { status: 'unpaid' } }));
      expect(await statusOf(c)).toBe('active');
    });

    it('invoice.paid and invoice.payment_succeeded -> active', async () => {
      for (const type of ['invoice.paid', 'invoice.payment_succeeded']) {
        const c = nextCustomer();
        await send(event('invoice.payment_failed', invoice(c, { next_payment_attempt: null, api }), { created: nowS(), api }));
        expect(await statusOf(c)).toBe('lockout');
        h.clock.advance(1_000);
        await send(event(type, { ...invoice(c, { api }), status: 'paid' }, { created: nowS(), api }));
        expect(await statusOf(c)).toBe('active');
      }
    });

    it('customer.deleted removes the record, and it stays removed against older events', async () => {
      const c = nextCustomer();
      const t0 = nowS();
      await send(event('invoice.payment_failed', invoice(c, { next_payment_attempt: null, api }), { created: t0, api }));
      h.clock.advance(2_000);
      const deleted = await send(event('customer.deleted', customer(c), { created: t0 + 2, api }));
      expect(deleted.body.outcome).toBe('applied');
      expect(await statusOf(c)).toBeNull();
      // An older failure delivered late: the tombstone wins.
      const late = await send(event('charge.failed', charge(c, { outcome_reason: 'stolen_card' }, api), { created: t0 + 1, api }));
      expect(late.body.outcome).toBe('stale');
      expect(await statusOf(c)).toBeNull();
    });
  });

  it('an older event than the one that set the status changes nothing; a same-second payment wins', async () => {
    const c = nextCustomer();
    const t = nowS();
    await send(event('invoice.paid', invoice(c, {}), { created: t + 10 }));
    const old = await send(event('invoice.payment_failed', invoice(c, { next_payment_attempt: null }), { created: t + 5 }));
    expect(old.body.outcome).toBe('stale');
    expect(await statusOf(c)).toBe('active');
    const sameSecond = await send(event('charge.failed', charge(c, { outcome_reason: 'lost_card' }), { created: t + 10 }));
    expect(sameSecond.body.outcome).toBe('stale');
    expect(await statusOf(c)).toBe('active');
  });

  it('shows the cause of every change in the subscriber history', async () => {
    const c = nextCustomer();
    const failed = event('charge.failed', charge(c, { failure_code: 'card_declined', outcome_reason: 'stolen_card' }), { created: nowS() });
    await send(failed);
    const res = await h.admin('GET', `/tenants/acme/subscribers/${c}`);
    expect(res.json()).toMatchObject({ status: 'lockout', reason: 'hard_decline' });
    expect(res.json().history).toEqual([
      {
        status: 'lockout',
        reason: 'hard_decline',
        source: 'stripe',
        event_id: failed.id,
        event_type: 'charge.failed',
        decline_code: 'stolen_card',
        occurred_at: new Date(failed.created * 1000).toISOString(),
        recorded_at: new Date(h.clock.ms).toISOString(),
      },
    ]);
  });

  it('acknowledges a redelivery and changes nothing', async () => {
    const c = nextCustomer();
    const failed = event('invoice.payment_failed', invoice(c, { next_payment_attempt: null }), { created: nowS() });
    expect((await send(failed)).body.outcome).toBe('applied');
    h.clock.advance(1_000);
    await h.setSubscriber('acme', c, 'active', 'manual');
    h.clock.advance(60_000);
    expect(await send(failed)).toEqual({ status: 200, body: { received: true, outcome: 'duplicate' } });
    expect(await statusOf(c)).toBe('active');
  });

  it('acknowledges and ignores irrelevant event types, and events without a customer', async () => {
    expect(await send(event('product.created', { id: 'prod_1', object: 'product' }, { created: nowS() }))).toEqual({
      status: 200,
      body: { received: true, outcome: 'irrelevant' },
    });
    const guest = await send(event('charge.failed', charge(null, { outcome_reason: 'stolen_card' }), { created: nowS() }));
    expect(guest).toEqual({ status: 200, body: { received: true, outcome: 'ignored' } });
  });

  it('400 invalid_signature: a wrong secret, a tampered body, a missing header, a stale timestamp', async () => {
    const fixture = event('charge.failed', charge(nextCustomer(), { outcome_reason: 'stolen_card' }), { created: nowS() });
    const wrong = await deliver(h, 'acme', fixture, 'whsec_not_the_secret_at_all_0000');
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json().code).toBe('invalid_signature');

    const { signature } = signed(fixture, SECRET, nowS());
    const tampered = await h.app.inject({
      method: 'POST',
      url: '/webhooks/stripe/acme',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      payload: JSON.stringify({ ...fixture, type: 'invoice.paid' }, null, 2),
    });
    expect(tampered.statusCode).toBe(400);

    const missing = await h.app.inject({ method: 'POST', url: '/webhooks/stripe/acme', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(fixture) });
    expect(missing.json().code).toBe('invalid_signature');

    const stale = await deliver(h, 'acme', fixture, SECRET, { timestampS: nowS() - 301 });
    expect(stale.statusCode).toBe(400);
    const justInTime = await deliver(h, 'acme', fixture, SECRET, { timestampS: nowS() - 299 });
    expect(justInTime.statusCode).toBe(200);
  });

  it('accepts a header with several v1 signatures, one of them valid', async () => {
    const fixture = event('charge.failed', charge(nextCustomer(), { outcome_reason: 'insufficient_funds' }), { created: nowS() });
    const { signature } = signed(fixture, SECRET, nowS());
    const [t, v1] = signature.split(',');
    const res = await deliver(h, 'acme', fixture, SECRET, { signature: `${t},v1=${'0'.repeat(64)},${v1},v0=abc` });
    expect(res.statusCode).toBe(200);
  });

  it('verifies with both signing secrets during a rotation, only the new one after it', async () => {
    await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: SECRET_2 });
    const a = event('charge.failed', charge(nextCustomer(), { outcome_reason: 'insufficient_funds' }), { created: nowS() });
    expect((await send(a, SECRET)).status).toBe(200);
    const b = event('charge.failed', charge(nextCustomer(), { outcome_reason: 'insufficient_funds' }), { created: nowS() });
    expect((await send(b, SECRET_2)).status).toBe(200);
    h.clock.advance(86_400_000 + 1_000);
    const c = event('charge.failed', charge(nextCustomer(), { outcome_reason: 'insufficient_funds' }), { created: nowS() });
    expect((await send(c, SECRET)).status).toBe(400);
    expect((await send(c, SECRET_2)).status).toBe(200);
  });

  it('404 for an unknown tenant, 400 for a tenant with no signing secret, 413 over 1 MiB', async () => {
    const fixture = event('charge.failed', charge(nextCustomer(), { outcome_reason: 'stolen_card' }), { created: nowS() });
    const unknown = await deliver(h, 'nobody', fixture, SECRET);
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().code).toBe('tenant_not_found');
    const noSecret = await deliver(h, 'no-secret', fixture, SECRET);
    expect(noSecret.statusCode).toBe(400);
    expect(noSecret.json().code).toBe('invalid_signature');
    const big = event('charge.failed', { ...charge(nextCustomer(), {}), metadata: { blob: 'x'.repeat(1024 * 1024) } }, { created: nowS() });
    const res = await deliver(h, 'acme', big, SECRET_2);
    expect(res.statusCode).toBe(413);
    expect(res.json().code).toBe('payload_too_large');
  });

  it('400 invalid_request for an event dated more than a day ahead, which would pin a status', async () => {
    const ahead = event('invoice.payment_failed', invoice(nextCustomer(), { next_payment_attempt: null }), { created: nowS() + 2 * 86_400 });
    const res = await deliver(h, 'acme', ahead, SECRET_2);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'invalid_request', detail: 'created: more than a day in the future' });
  });

  it('400 invalid_request for a signed body that is not a Stripe event', async () => {
    const payload = JSON.stringify({ hello: 'world' });
    const { signature } = { signature: (await import('stripe')).default.webhooks.generateTestHeaderString({ payload, secret: SECRET_2, timestamp: nowS() }) };
    const res = await h.app.inject({ method: 'POST', url: '/webhooks/stripe/acme', headers: { 'content-type': 'application/json', 'stripe-signature': signature }, payload });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('invalid_request');
  });
});

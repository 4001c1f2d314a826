import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { harness, T0 } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';
import { event, invoice, paymentIds } from '../helpers/stripe-fixtures.js';
import type { PaymentIds } from '../helpers/stripe-fixtures.js';
import { deliver } from '../helpers/webhook.js';

/**
 * Whatever decides a status is guarded as an override is: the Stripe webhook signing secret
 * needs `stripe:write`. A key with every other scope (the full list before `stripe:write`
 * existed) tries to set its own signing secret and sign its own events, to let a locked-out
 * customer in and to lock out one who paid: refused at every door. A key given
 * `stripe:write` by name sets it, and the change is recorded with that key, in the health.
 */
const engines = await availableEngines();
const REAL = 'whsec_the_real_stripe_endpoint_0123456789';
const FORGED = 'whsec_chosen_by_the_attacker_0123456789';
const ROTATED = 'whsec_rotated_by_the_backend_0123456789';
/** Every scope a key could hold before `stripe:write` existed. */
const OLD_ALL = [
  'status:read',
  'subscribers:read',
  'subscribers:write',
  'settings:write',
  'webhooks:write',
  'keys:write',
];

describe.each(engines)('the Stripe signing secret needs stripe:write ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant;
  const locked: PaymentIds = paymentIds();
  const paying: PaymentIds = paymentIds();
  const nowS = () => Math.floor(h.clock.ms / 1000);

  async function createKey(scopes: string[], name = `backend ${scopes.join(' ')}`) {
    const res = await h.admin('POST', '/tenants/acme/keys', { name, scopes });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; secret_key: string; prefix: string; scopes: string[] };
  }
  function v1(key: string, method: string, url: string, body?: unknown) {
    return h.app.inject({
      method: method as 'GET',
      url: `/v1${url}`,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });
  }
  async function statusOf(customerId: string): Promise<string> {
    const res = await h.lookup('acme', { key: acme.publishable_key, customerId });
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { status: string }).status;
  }
  const failed = (customer: string, ids: PaymentIds) =>
    event('invoice.payment_failed', invoice(customer, { ids, next_payment_attempt: null }), { created: nowS() });
  const paid = (customer: string, ids: PaymentIds) =>
    event('invoice.paid', invoice(customer, { ids, status: 'paid' }), { created: nowS() });

  beforeAll(async () => {
    h = await harness(engine);
    acme = await h.createTenant('acme', { policy: { grace_days: 0 } });
    expect((await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: REAL })).statusCode).toBe(200);
    // Stripe's own events: one customer locked out, one who paid.
    expect((await deliver(h, 'acme', failed('cus_locked', locked), REAL)).json()).toMatchObject({ outcome: 'applied' });
    h.clock.advance(1_000);
    expect((await deliver(h, 'acme', failed('cus_paying', paying), REAL)).json()).toMatchObject({ outcome: 'applied' });
    h.clock.advance(1_000);
    expect((await deliver(h, 'acme', paid('cus_paying', paying), REAL)).json()).toMatchObject({ outcome: 'applied' });
    expect(await statusOf('cus_locked')).toBe('lockout');
    expect(await statusOf('cus_paying')).toBe('active');
  });
  afterAll(() => h.close());

  it('refuses a key without stripe:write the signing secret, on PATCH, on PUT and by minting a key that holds it; its forged events change nothing', async () => {
    const attacker = await createKey(OLD_ALL, 'every scope but stripe:write');
    expect(attacker.scopes).not.toContain('stripe:write');

    const patched = await v1(attacker.secret_key, 'PATCH', '/settings', { stripe_webhook_secret: FORGED });
    expect([patched.statusCode, patched.json().code]).toEqual([403, 'insufficient_scope']);
    expect(patched.json().detail).toContain('stripe:write');
    // Not even beside a field it may change: nothing of the request is applied.
    const mixed = await v1(attacker.secret_key, 'PATCH', '/settings', {
      card_update_url: 'https://acme.test/card',
      stripe_webhook_secret: FORGED,
    });
    expect([mixed.statusCode, mixed.json().code]).toEqual([403, 'insufficient_scope']);
    const put = await v1(attacker.secret_key, 'PUT', '/settings/stripe-webhook-secret', { secret: FORGED });
    expect([put.statusCode, put.json().code]).toEqual([403, 'insufficient_scope']);
    const minted = await v1(attacker.secret_key, 'POST', '/keys', { name: 'escalate', scopes: ['stripe:write'] });
    expect([minted.statusCode, minted.json().code]).toEqual([403, 'insufficient_scope']);
    // Its own settings it still changes.
    const allowed = await v1(attacker.secret_key, 'PATCH', '/settings', { card_update_url: 'https://acme.test/card' });
    expect(allowed.statusCode, allowed.body).toBe(200);

    // The attack: sign its own events to let the locked-out customer in and to lock out the one who paid.
    h.clock.advance(1_000);
    const unlock = await deliver(h, 'acme', paid('cus_locked', locked), FORGED);
    expect([unlock.statusCode, unlock.json().code]).toEqual([400, 'invalid_signature']);
    const lock = await deliver(h, 'acme', failed('cus_paying', paymentIds()), FORGED);
    expect([lock.statusCode, lock.json().code]).toEqual([400, 'invalid_signature']);
    expect(await statusOf('cus_locked')).toBe('lockout');
    expect(await statusOf('cus_paying')).toBe('active');

    // No change was recorded but the operator's.
    const health = await h.admin('GET', '/tenants/acme/health');
    expect(health.json().stripe_webhook_secret).toEqual({
      set: true,
      changes: [{ at: new Date(T0).toISOString(), by: 'operator', key: null }],
    });
  });

  it('sets the secret with stripe:write, records the key that did, and keeps the record once the key is revoked', async () => {
    const backend = await createKey(['stripe:write'], 'stripe rotation');
    h.clock.advance(60_000);
    const put = await v1(backend.secret_key, 'PUT', '/settings/stripe-webhook-secret', { secret: ROTATED });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.body).not.toContain(ROTATED);
    const change = {
      at: new Date(h.clock.ms).toISOString(),
      by: 'key',
      key: { id: backend.id, prefix: backend.prefix, name: 'stripe rotation' },
    };
    expect(put.json()).toEqual({
      stripe_webhook_secret_set: true,
      // The replaced secret verifies for the overlap (the service's default, 24 h).
      previous_expires_at: new Date(h.clock.ms + 86_400_000).toISOString(),
      changes: [change, { at: new Date(T0).toISOString(), by: 'operator', key: null }],
    });
    // It needs nothing else: stripe:write alone reads no settings.
    expect((await v1(backend.secret_key, 'GET', '/settings')).statusCode).toBe(403);

    // Events signed with the new secret are taken.
    h.clock.advance(1_000);
    expect((await deliver(h, 'acme', paid('cus_locked', locked), ROTATED)).json()).toMatchObject({
      outcome: 'applied',
    });
    expect(await statusOf('cus_locked')).toBe('active');

    // A key with both scopes may use PATCH too; the operator's change is the operator's.
    const both = await createKey(['settings:write', 'stripe:write'], 'settings and stripe');
    h.clock.advance(1_000);
    const patched = await v1(both.secret_key, 'PATCH', '/settings', { stripe_webhook_secret: REAL });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json().stripe_webhook_secret_set).toBe(true);
    const bothChange = {
      at: new Date(h.clock.ms).toISOString(),
      by: 'key',
      key: { id: both.id, prefix: both.prefix, name: 'settings and stripe' },
    };

    // Revoked, the key is still named by the record, in the tenant's health and the operator's.
    expect((await h.admin('DELETE', `/tenants/acme/keys/${backend.id}`)).statusCode).toBe(204);
    const reader = await createKey(['subscribers:read']);
    const health = await v1(reader.secret_key, 'GET', '/health');
    expect(health.statusCode, health.body).toBe(200);
    expect(health.json().stripe_webhook_secret).toEqual({
      set: true,
      changes: [bothChange, change, { at: new Date(T0).toISOString(), by: 'operator', key: null }],
    });
    expect((await h.admin('GET', '/tenants/acme/health')).json().stripe_webhook_secret).toEqual(
      health.json().stripe_webhook_secret,
    );
  });

  it('lets a key grant stripe:write only when it holds it', async () => {
    const manager = await createKey(['keys:write', 'stripe:write']);
    const granted = await v1(manager.secret_key, 'POST', '/keys', { name: 'rotator', scopes: ['stripe:write'] });
    expect(granted.statusCode, granted.body).toBe(201);
    expect(granted.json().scopes).toEqual(['stripe:write']);
    const operatorPut = await h.admin('PUT', '/tenants/acme/settings/stripe-webhook-secret', { secret: ROTATED });
    expect(operatorPut.statusCode, operatorPut.body).toBe(200);
    expect(operatorPut.json().changes[0]).toMatchObject({ by: 'operator', key: null });
  });
});

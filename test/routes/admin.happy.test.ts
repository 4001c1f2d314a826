import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { T0, harness } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';

const engines = await availableEngines();
const STARTER = { powered_by_watermark: true, custom_domain: false, downstream_webhooks: false };

describe.each(engines)('admin API, happy path ($name)', (engine) => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness(engine);
  });
  afterAll(() => h.close());

  it('creates a tenant with defaults and shows its keys once', async () => {
    const res = await h.admin('POST', '/tenants', { slug: 'acme' });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      slug: 'acme',
      tier: 'starter',
      entitlements: STARTER,
      card_update_url: null,
      hmac_required: false,
      suspended: false,
      allowed_origins: null,
      lookups_per_minute: null,
      branding: {},
      policy: { enforcement: 'gate', grace_days: 0, escalate_after_days: null, notices: [] },
      livemode: null,
      created_at: new Date(T0).toISOString(),
      updated_at: new Date(T0).toISOString(),
      publishable_key: expect.stringMatching(/^pk_live_[A-Za-z0-9]{24,}$/),
      test_publishable_key: expect.stringMatching(/^pk_test_[A-Za-z0-9]{24,}$/),
      hmac_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    expect(Buffer.from(body.hmac_secret, 'base64url').length).toBe(32);
  });

  it('creates a tenant with every field', async () => {
    const res = await h.admin('POST', '/tenants', {
      slug: 'full-co',
      tier: 'scale',
      card_update_url: 'https://billing.full.test/card?x=1',
      hmac_required: true,
      allowed_origins: ['https://app.full.test'],
    });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({
      slug: 'full-co',
      tier: 'scale',
      entitlements: { powered_by_watermark: false, custom_domain: true, downstream_webhooks: true },
      card_update_url: 'https://billing.full.test/card?x=1',
      hmac_required: true,
      allowed_origins: ['https://app.full.test'],
    });
  });

  it('lists and shows tenants without any key or secret (a Stripe API key by its prefix only)', async () => {
    const list = await h.admin('GET', '/tenants');
    expect(list.statusCode).toBe(200);
    expect(list.json().data.map((t: { slug: string }) => t.slug)).toEqual(['acme', 'full-co']);
    const show = await h.admin('GET', '/tenants/acme');
    expect(show.statusCode).toBe(200);
    expect(Object.keys(show.json()).sort()).toEqual([
      'allowed_origins',
      'branding',
      'card_update_url',
      'created_at',
      'credentials',
      'derived_subscriber_counts',
      'entitlements',
      'hmac_required',
      'livemode',
      'lookups_per_minute',
      'mode',
      'policy',
      'slug',
      'stripe_api_key',
      'stripe_webhook_secret_set',
      'subscriber_counts',
      'suspended',
      'tier',
      'updated_at',
    ]);
  });

  it('updates each field, and only the fields given', async () => {
    h.clock.advance(60_000);
    const res = await h.admin('PATCH', '/tenants/acme', { tier: 'growth', card_update_url: 'https://acme.test/card' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      tier: 'growth',
      entitlements: { powered_by_watermark: false, custom_domain: true, downstream_webhooks: false },
      card_update_url: 'https://acme.test/card',
      hmac_required: false,
      updated_at: new Date(T0 + 60_000).toISOString(),
      created_at: new Date(T0).toISOString(),
    });
    const more = await h.admin('PATCH', '/tenants/acme', {
      hmac_required: true,
      suspended: true,
      allowed_origins: ['http://localhost:3000'],
    });
    expect(more.json()).toMatchObject({
      tier: 'growth',
      hmac_required: true,
      suspended: true,
      allowed_origins: ['http://localhost:3000'],
    });
    const cleared = await h.admin('PATCH', '/tenants/acme', {
      card_update_url: null,
      allowed_origins: null,
      suspended: false,
    });
    expect(cleared.json()).toMatchObject({
      card_update_url: null,
      allowed_origins: null,
      suspended: false,
      hmac_required: true,
    });
  });

  it('stores a Stripe webhook signing secret without ever returning it', async () => {
    const res = await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: 'whsec_abcdefghijklmnop1234' });
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain('whsec_');
  });

  it('rotates keys: the new one in clear, with the expiry of the old one', async () => {
    const res = await h.admin('POST', '/tenants/acme/rotate', { key: 'hmac' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ slug: 'acme', hmac_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
    expect(res.json().publishable_key).toBeUndefined();
    const pk = await h.admin('POST', '/tenants/acme/rotate', { key: 'publishable' });
    expect(pk.json().publishable_key).toMatch(/^pk_/);
    expect(pk.json().hmac_secret).toBeUndefined();
  });

  it('sets, shows with history, and clears a subscriber', async () => {
    const put = await h.admin('PUT', '/tenants/acme/subscribers/cus_42', { status: 'warning' });
    expect(put.statusCode).toBe(200);
    expect(put.json()).toMatchObject({ processor_customer_id: 'cus_42', status: 'warning', reason: 'manual' });
    h.clock.advance(1_000);
    await h.admin('PUT', '/tenants/acme/subscribers/cus_42', { status: 'lockout', reason: 'hard_decline' });
    h.clock.advance(1_000);
    // The same status and reason again changes nothing, and is kept with its author all the same.
    await h.admin('PUT', '/tenants/acme/subscribers/cus_42', { status: 'lockout', reason: 'hard_decline' });
    const show = await h.admin('GET', '/tenants/acme/subscribers/cus_42');
    expect(show.statusCode).toBe(200);
    const body = show.json();
    expect(body).toMatchObject({ status: 'lockout', reason: 'hard_decline' });
    expect(
      body.history.map((e: { status: string; reason: string; source: string; effect: string }) => [
        e.status,
        e.reason,
        e.source,
        e.effect,
      ]),
    ).toEqual([
      ['warning', 'manual', 'admin', 'changed'],
      ['lockout', 'hard_decline', 'admin', 'changed'],
      ['lockout', 'hard_decline', 'admin', 'none'],
    ]);
    expect(body.history[1]).toMatchObject({
      event_id: null,
      event_type: null,
      decline_code: null,
      occurred_at: expect.any(String),
    });

    const del = await h.admin('DELETE', '/tenants/acme/subscribers/cus_42');
    expect(del.statusCode).toBe(204);
    expect(del.body).toBe('');
    // The record is gone (the lookup answers unknown, so active); its history stays readable.
    const cleared = await h.admin('GET', '/tenants/acme/subscribers/cus_42');
    expect(cleared.statusCode).toBe(200);
    expect(cleared.json()).toMatchObject({ status: null, reason: null, episodes: [] });
    expect(cleared.json().history.map((e: { status: string | null; effect: string }) => [e.status, e.effect])).toEqual([
      ['warning', 'changed'],
      ['lockout', 'changed'],
      ['lockout', 'none'],
      [null, 'removed'],
    ]);
    expect((await h.admin('GET', '/tenants/acme/subscribers/cus_never_seen')).statusCode).toBe(404);
    // Deleting an unknown subscriber leaves it unknown: still 204, and kept in its history.
    expect((await h.admin('DELETE', '/tenants/acme/subscribers/cus_42')).statusCode).toBe(204);
    expect((await h.admin('DELETE', '/tenants/acme/subscribers/cus_never_seen')).statusCode).toBe(204);
    expect((await h.admin('GET', '/tenants/acme/subscribers/cus_never_seen')).json()).toMatchObject({
      status: null,
      history: [{ status: null, effect: 'none', source: 'admin' }],
    });
  });

  it('accepts the longest customer id the contract allows', async () => {
    const id = `cus_${'a'.repeat(251)}`;
    const res = await h.admin('PUT', `/tenants/acme/subscribers/${id}`, { status: 'warning' });
    expect(res.statusCode).toBe(200);
    expect(res.json().processor_customer_id).toBe(id);
  });

  it('keeps the history across a removal, with the removal recorded', async () => {
    h.clock.advance(1_000);
    await h.admin('PUT', '/tenants/acme/subscribers/cus_42', { status: 'active', reason: 'paid' });
    const history = (await h.admin('GET', '/tenants/acme/subscribers/cus_42')).json().history as {
      status: string | null;
    }[];
    expect(history.map((e) => e.status)).toEqual(['warning', 'lockout', 'lockout', null, 'active']);
  });

  it('lists the seeded tiers and creates or replaces a tier', async () => {
    const list = await h.admin('GET', '/tiers');
    expect(list.statusCode).toBe(200);
    expect(list.json().data.map((t: { name: string; entitlements: unknown }) => [t.name, t.entitlements])).toEqual([
      ['growth', { powered_by_watermark: false, custom_domain: true, downstream_webhooks: false }],
      ['scale', { powered_by_watermark: false, custom_domain: true, downstream_webhooks: true }],
      ['starter', STARTER],
    ]);
    const put = await h.admin('PUT', '/tiers/starter', {
      entitlements: { ...STARTER, custom_domain: true, priority_support: false },
    });
    expect(put.statusCode).toBe(200);
    expect(put.json()).toMatchObject({
      name: 'starter',
      entitlements: { ...STARTER, custom_domain: true, priority_support: false },
    });
    const t = await h.admin('GET', '/tenants/full-co');
    expect(t.json().tier).toBe('scale');
  });

  it('serves the OpenAPI 3.1 document generated from the route schemas', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/api/subscriber-status/{tenantSlug}',
        '/admin/v1/tenants',
        '/admin/v1/tenants/{slug}/subscribers/{customerId}',
        '/admin/v1/tiers/{name}',
      ]),
    );
    const lookup = doc.paths['/api/subscriber-status/{tenantSlug}'].get;
    expect(lookup.parameters.map((p: { name: string }) => p.name)).toEqual(
      expect.arrayContaining(['processor_customer_id', 'hmac', 'tenantSlug']),
    );
    expect(Object.keys(lookup.responses)).toEqual(expect.arrayContaining(['200', '401', '402', '403', '404']));
  });

  it('answers /healthz and /readyz', async () => {
    expect((await h.app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
    const ready = await h.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ status: 'ok', store: engine.name });
  });
});

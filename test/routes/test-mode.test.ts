import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics/index.js';
import { seedDemo, DEMO_SLUG } from '../../src/demo/index.js';
import { PUBLISHABLE_KEY_RE } from '../../src/domain/keys.js';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';
import { event, invoice } from '../helpers/stripe-fixtures.js';
import type { StripeEventFixture } from '../helpers/stripe-fixtures.js';
import { deliver } from '../helpers/webhook.js';

const engines = await availableEngines();
const SECRET = 'whsec_live_mode_0123456789abcdef';
const TEST_SECRET = 'whsec_test_mode_0123456789abcdef';

/** The random part of a key after its prefix: base62 only, as long as a modeless key's. */
const LIVE_KEY = /^pk_live_[A-Za-z0-9]{32}$/;
const TEST_KEY = /^pk_test_[A-Za-z0-9]{32}$/;
const MODELESS_KEY = /^pk_[A-Za-z0-9]{32}$/;

describe.each(engines)('modes: one tenant, a live and a test mode ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant & { test_publishable_key: string };
  let n = 0;
  const nextCustomer = () => `cus_mode${(n += 1)}`;
  const nowS = () => Math.floor(h.clock.ms / 1000);

  beforeAll(async () => {
    h = await harness(engine, { metrics: createMetrics() });
    acme = (await h.createTenant('acme')) as typeof acme;
    expect((await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: SECRET })).statusCode).toBe(200);
    expect((await h.admin('PATCH', '/tenants/acme?mode=test', { stripe_webhook_secret: TEST_SECRET })).statusCode).toBe(
      200,
    );
  });
  afterAll(() => h.close());

  async function send(fixture: StripeEventFixture, secret: string) {
    const res = await deliver(h, 'acme', fixture, secret);
    return { status: res.statusCode, body: res.json() as { received?: boolean; outcome?: string; code?: string } };
  }
  async function statusWith(key: string, customerId: string): Promise<string> {
    const res = await h.lookup('acme', { key, customerId });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().status as string;
  }
  const failure = (customerId: string, livemode: boolean) =>
    event('invoice.payment_failed', invoice(customerId, { next_payment_attempt: null }), { created: nowS(), livemode });

  it('creates a tenant with a live key (pk_live_) and a test key (pk_test_); livemode stays readable', async () => {
    expect(acme.publishable_key).toMatch(LIVE_KEY);
    expect(acme.test_publishable_key).toMatch(TEST_KEY);
    for (const key of [acme.publishable_key, acme.test_publishable_key]) expect(key).toMatch(PUBLISHABLE_KEY_RE);
    expect(acme).toMatchObject({ livemode: null });
    const one = (await h.admin('GET', '/tenants/acme?mode=test')).json() as Record<string, unknown>;
    expect(one).toMatchObject({ slug: 'acme', mode: 'test', stripe_webhook_secret_set: true });
    // The tenant is listed once: its test mode is no tenant of its own.
    const list = (await h.admin('GET', '/tenants')).json() as { data: { slug: string }[] };
    expect(list.data.map((t) => t.slug)).toEqual(['acme']);
    for (const key of [acme.publishable_key, acme.test_publishable_key])
      expect(await statusWith(key, 'cus_nobody')).toBe('active');
  });

  it('a subscriber set in test mode is unknown (active) to the live key, and the reverse', async () => {
    const c = nextCustomer();
    const put = await h.admin('PUT', `/tenants/acme/subscribers/${c}?mode=test`, { status: 'lockout' });
    expect(put.statusCode, put.body).toBe(200);
    expect(await statusWith(acme.test_publishable_key, c)).toBe('lockout');
    expect(await statusWith(acme.publishable_key, c)).toBe('active');
    expect((await h.admin('GET', `/tenants/acme/subscribers/${c}`)).json().code).toBe('subscriber_not_found');
    expect((await h.admin('GET', `/tenants/acme/subscribers/${c}?mode=test`)).json().status).toBe('lockout');

    const d = nextCustomer();
    await h.setSubscriber('acme', d, 'warning', 'soft_decline');
    expect(await statusWith(acme.publishable_key, d)).toBe('warning');
    expect(await statusWith(acme.test_publishable_key, d)).toBe('active');
    // The counts are each mode's.
    const live = (await h.admin('GET', '/tenants/acme')).json() as { subscriber_counts: Record<string, number> };
    const test = (await h.admin('GET', '/tenants/acme?mode=test')).json() as {
      subscriber_counts: Record<string, number>;
    };
    expect(live.subscriber_counts).toMatchObject({ warning: 1, lockout: 0 });
    expect(test.subscriber_counts).toMatchObject({ warning: 0, lockout: 1 });
  });

  it("routes Stripe events by livemode, each verified with its mode's signing secret", async () => {
    const a = nextCustomer();
    const b = nextCustomer();
    expect(await send(failure(a, true), SECRET)).toEqual({ status: 200, body: { received: true, outcome: 'applied' } });
    expect(await send(failure(b, false), TEST_SECRET)).toEqual({
      status: 200,
      body: { received: true, outcome: 'applied' },
    });
    expect(await statusWith(acme.publishable_key, a)).toBe('lockout');
    expect(await statusWith(acme.test_publishable_key, a)).toBe('active');
    expect(await statusWith(acme.test_publishable_key, b)).toBe('lockout');
    expect(await statusWith(acme.publishable_key, b)).toBe('active');

    // An event signed with the other mode's secret is refused: it never lands in a mode it is not of.
    const c = nextCustomer();
    expect((await send(failure(c, false), SECRET)).status).toBe(400);
    expect((await send(failure(c, true), TEST_SECRET)).status).toBe(400);
    expect(await statusWith(acme.publishable_key, c)).toBe('active');
    expect(await statusWith(acme.test_publishable_key, c)).toBe('active');
  });

  it('a malformed livemode is refused', async () => {
    const odd = { ...failure(nextCustomer(), true), livemode: 'true' } as unknown as StripeEventFixture;
    const res = await deliver(h, 'acme', odd, SECRET);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'invalid_request', detail: 'livemode: must be true or false' });
  });

  it("rotates each mode's publishable key on its own; the key replaced keeps working for the overlap", async () => {
    const rotated = await h.admin('POST', '/tenants/acme/rotate?mode=test', { key: 'publishable' });
    expect(rotated.statusCode).toBe(200);
    const testKey = rotated.json().publishable_key as string;
    expect(testKey).toMatch(TEST_KEY);
    const c = nextCustomer();
    await h.admin('PUT', `/tenants/acme/subscribers/${c}?mode=test`, { status: 'warning' });
    for (const key of [testKey, acme.test_publishable_key]) expect(await statusWith(key, c)).toBe('warning');
    expect(await statusWith(acme.publishable_key, c)).toBe('active');
    const live = (await h.admin('POST', '/tenants/acme/rotate', { key: 'publishable' })).json()
      .publishable_key as string;
    expect(live).toMatch(LIVE_KEY);
    expect(await statusWith(live, c)).toBe('active');
  });

  it("a secret key reads and writes its own mode's data only", async () => {
    const created = await h.admin('POST', '/tenants/acme/keys?mode=test', {
      name: 'test backend',
      scopes: ['status:read', 'subscribers:read', 'subscribers:write'],
    });
    expect(created.statusCode, created.body).toBe(201);
    const sk = created.json().secret_key as string;
    expect(sk).toMatch(/^sk_test_/);
    const v1 = (method: string, url: string, body?: unknown) =>
      h.app.inject({
        method: method as 'GET',
        url: `/v1${url}`,
        headers: {
          authorization: `Bearer ${sk}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      });
    const c = nextCustomer();
    const put = await v1('PUT', `/subscribers/${c}/override`, { status: 'lockout' });
    expect(put.statusCode, put.body).toBe(200);
    expect((await v1('GET', `/subscribers/${c}/status`)).json().status).toBe('lockout');
    expect(await statusWith(acme.test_publishable_key, c)).toBe('lockout');
    expect(await statusWith(acme.publishable_key, c)).toBe('active');
    // A live subscriber is unknown to the test key; the statuses list shows the test mode's only.
    const live = nextCustomer();
    await h.setSubscriber('acme', live, 'lockout');
    expect((await v1('GET', `/subscribers/${live}/status`)).json()).toEqual({ status: 'active' });
    const listed = (await v1('GET', '/statuses')).json() as { data: { processor_customer_id: string }[] };
    const ids = listed.data.map((d) => d.processor_customer_id);
    expect(ids).toContain(c);
    expect(ids).not.toContain(live);
    // The lookup route takes the test secret key too, and answers from the test mode.
    expect(await statusWith(sk, c)).toBe('lockout');
    expect(await statusWith(sk, live)).toBe('active');
  });

  it('the replay takes events into the mode asked for, and skips those of the other mode', async () => {
    const c1 = nextCustomer();
    const c2 = nextCustomer();
    const res = await h.admin('POST', '/tenants/acme/stripe-events?mode=test', {
      events: [failure(c1, true), failure(c2, false)],
    });
    expect(res.statusCode, res.body).toBe(200);
    expect((res.json() as { results: string[] }).results).toEqual(['livemode_mismatch', 'applied']);
    expect(await statusWith(acme.test_publishable_key, c2)).toBe('lockout');
    expect(await statusWith(acme.publishable_key, c2)).toBe('active');
    expect(await statusWith(acme.publishable_key, c1)).toBe('active');
  });

  it('400 invalid_request for a mode that is not live or test, never taken for live', async () => {
    for (const url of ['/tenants/acme/subscribers/cus_x?mode=prod', '/tenants/acme?mode=TEST']) {
      const res = await h.admin('GET', url);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ code: 'invalid_request' });
    }
  });

  it('the demo tenant, created without a test key, is a live tenant', async () => {
    const page = await seedDemo(h.store, new Date(h.clock.ms));
    expect(page?.publishableKey).toMatch(MODELESS_KEY);
    expect((await h.store.tenants.getTenant(DEMO_SLUG))?.mode).toBe('live');
  });

  it("previews warning and lockout on a test key's lookup, with a sample lockout_at and its payment link; a live key does not", async () => {
    await h.admin('PATCH', '/tenants/acme', {
      hmac_required: true,
      card_update_url: 'https://test.example/card',
      branding: { payment_url: 'https://test.example/pay' },
    });
    const cus = nextCustomer();
    const preview = (key: string, value: string, extra: Record<string, string> = {}) =>
      h.lookup('acme', {
        key,
        customerId: cus,
        query: new URLSearchParams({ preview: value, ...extra }).toString(),
      });
    const testKey = acme.test_publishable_key;
    const week = new Date(Math.floor((h.clock.ms + 7 * 86_400_000) / 1000) * 1000).toISOString().replace('.000Z', 'Z');
    const warning = await preview(testKey, 'warning');
    expect(warning.statusCode).toBe(200);
    // The branding and the card update URL are the tenant's, shared by both modes.
    expect(warning.body).toBe(
      `{"status":"warning","card_update_url":"https://test.example/card","entitlements":{"powered_by_watermark":true,"custom_domain":false,"downstream_webhooks":false},"lockout_at":"${week}","pay_url":"https://test.example/pay"}`,
    );
    expect((await preview(testKey, 'lockout')).json()).toEqual({
      status: 'lockout',
      card_update_url: null,
      entitlements: { powered_by_watermark: true, custom_domain: false, downstream_webhooks: false },
      pay_url: 'https://test.example/pay',
    });
    // Without preview the hmac is required as configured (the tenant's setting, in both modes).
    expect((await h.lookup('acme', { key: testKey, customerId: cus })).json()).toMatchObject({
      code: 'hmac_required',
    });
    expect((await preview(testKey, 'lockout', { hmac: 'f'.repeat(64) })).statusCode).toBe(403);
    expect((await preview(testKey, 'active')).json()).toMatchObject({ code: 'hmac_required' });
    // A live key: preview is an unknown parameter, and the hmac is required.
    expect((await preview(acme.publishable_key, 'lockout')).json()).toMatchObject({ code: 'hmac_required' });
  });
});

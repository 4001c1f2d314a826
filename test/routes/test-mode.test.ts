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
const SECRET = 'whsec_test_mode_0123456789abcdef';

/** The random part of a key after its prefix: base62 only, as long as a modeless key's. */
const LIVE_KEY = /^pk_live_[A-Za-z0-9]{32}$/;
const TEST_KEY = /^pk_test_[A-Za-z0-9]{32}$/;
const MODELESS_KEY = /^pk_[A-Za-z0-9]{32}$/;

describe.each(engines)('test mode: a tenant takes live events, test events or both ($name)', (engine) => {
  let h: Harness;
  let live: CreatedTenant;
  let test: CreatedTenant;
  let either: CreatedTenant;
  let n = 0;
  const nextCustomer = () => `cus_mode${(n += 1)}`;
  const nowS = () => Math.floor(h.clock.ms / 1000);

  beforeAll(async () => {
    h = await harness(engine, { metrics: createMetrics() });
    live = await h.createTenant('live-co', { livemode: true });
    test = await h.createTenant('test-co', { livemode: false });
    either = await h.createTenant('either-co');
    for (const slug of ['live-co', 'test-co', 'either-co']) {
      const res = await h.admin('PATCH', `/tenants/${slug}`, { stripe_webhook_secret: SECRET });
      expect(res.statusCode).toBe(200);
    }
  });
  afterAll(() => h.close());

  const keyOf = (slug: string) =>
    ({ 'live-co': live, 'test-co': test, 'either-co': either })[slug]?.publishable_key ?? '';
  async function send(slug: string, fixture: StripeEventFixture) {
    const res = await deliver(h, slug, fixture, SECRET);
    return { status: res.statusCode, body: res.json() as { received?: boolean; outcome?: string } };
  }
  async function statusOf(slug: string, customerId: string): Promise<string> {
    const res = await h.lookup(slug, { key: keyOf(slug), customerId });
    expect(res.statusCode).toBe(200);
    return res.json().status as string;
  }
  const failure = (customerId: string, livemode: boolean) =>
    event('invoice.payment_failed', invoice(customerId, { next_payment_attempt: null }), { created: nowS(), livemode });

  it('creates live, test and either tenants, each key with its prefix, and shows livemode', async () => {
    expect(live).toMatchObject({ livemode: true });
    expect(live.publishable_key).toMatch(LIVE_KEY);
    expect(test).toMatchObject({ livemode: false });
    expect(test.publishable_key).toMatch(TEST_KEY);
    expect(either).toMatchObject({ livemode: null });
    expect(either.publishable_key).toMatch(MODELESS_KEY);
    for (const key of [live.publishable_key, test.publishable_key, either.publishable_key])
      expect(key).toMatch(PUBLISHABLE_KEY_RE);

    const one = (await h.admin('GET', '/tenants/test-co')).json() as Record<string, unknown>;
    expect(one.livemode).toBe(false);
    const list = (await h.admin('GET', '/tenants')).json() as { data: { slug: string; livemode: unknown }[] };
    expect(Object.fromEntries(list.data.map((t) => [t.slug, t.livemode]))).toMatchObject({
      'live-co': true,
      'test-co': false,
      'either-co': null,
    });

    // Every prefix is a key the lookup takes.
    for (const slug of ['live-co', 'test-co', 'either-co']) expect(await statusOf(slug, 'cus_nobody')).toBe('active');
  });

  it('a live tenant acknowledges a test event with livemode_mismatch and changes nothing; a live one applies', async () => {
    const c = nextCustomer();
    expect(await send('live-co', failure(c, false))).toEqual({
      status: 200,
      body: { received: true, outcome: 'livemode_mismatch' },
    });
    expect(await statusOf('live-co', c)).toBe('active');
    // Not kept: no record, no history.
    expect((await h.admin('GET', `/tenants/live-co/subscribers/${c}`)).json().code).toBe('subscriber_not_found');

    expect(await send('live-co', failure(c, true))).toEqual({
      status: 200,
      body: { received: true, outcome: 'applied' },
    });
    expect(await statusOf('live-co', c)).toBe('lockout');
  });

  it('a test tenant acknowledges a live event with livemode_mismatch and changes nothing; a test one applies', async () => {
    const c = nextCustomer();
    await h.setSubscriber('test-co', c, 'warning', 'soft_decline');
    h.clock.advance(2_000);
    const paid = event('invoice.paid', invoice(c, { status: 'paid' }), { created: nowS(), livemode: true });
    expect(await send('test-co', paid)).toEqual({
      status: 200,
      body: { received: true, outcome: 'livemode_mismatch' },
    });
    expect(await statusOf('test-co', c)).toBe('warning');
    const history = (await h.admin('GET', `/tenants/test-co/subscribers/${c}`)).json() as { history: unknown[] };
    expect(history.history).toHaveLength(1);

    const lockout = failure(nextCustomer(), false);
    expect((await send('test-co', lockout)).body.outcome).toBe('applied');
  });

  it('a tenant with livemode null takes both modes, as before', async () => {
    const a = nextCustomer();
    const b = nextCustomer();
    expect((await send('either-co', failure(a, true))).body.outcome).toBe('applied');
    expect((await send('either-co', failure(b, false))).body.outcome).toBe('applied');
    expect(await statusOf('either-co', a)).toBe('lockout');
    expect(await statusOf('either-co', b)).toBe('lockout');
  });

  it('an irrelevant type of the other mode is a livemode_mismatch too, and a malformed livemode is refused', async () => {
    const product = event('product.created', { id: 'prod_1', object: 'product' }, { created: nowS(), livemode: false });
    expect((await send('live-co', product)).body.outcome).toBe('livemode_mismatch');
    expect((await send('test-co', product)).body.outcome).toBe('irrelevant');

    const odd = { ...failure(nextCustomer(), true), livemode: 'true' } as unknown as StripeEventFixture;
    const res = await deliver(h, 'live-co', odd, SECRET);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'invalid_request', detail: 'livemode: must be true or false' });
  });

  it('a mismatched event is not kept: once the tenant takes its mode, a redelivery applies it', async () => {
    await h.createTenant('switch-co', { livemode: true });
    await h.admin('PATCH', '/tenants/switch-co', { stripe_webhook_secret: SECRET });
    const c = nextCustomer();
    const e = failure(c, false);
    expect((await send('switch-co', e)).body.outcome).toBe('livemode_mismatch');
    const patched = await h.admin('PATCH', '/tenants/switch-co', { livemode: null });
    expect(patched.statusCode).toBe(200);
    expect(patched.json().livemode).toBeNull();
    expect((await send('switch-co', e)).body.outcome).toBe('applied');
    expect((await send('switch-co', e)).body.outcome).toBe('duplicate');
  });

  it('counts mismatched events in the metrics, by type and outcome', async () => {
    const before = await h.app.inject({ method: 'GET', url: '/metrics' });
    const series = 'dunwall_webhook_events_total{type="invoice.payment_failed",outcome="livemode_mismatch"}';
    const value = (text: string) =>
      Number(new RegExp(`^${series.replace(/[{}"()[\]]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1] ?? '0');
    const start = value(before.body);
    await send('live-co', failure(nextCustomer(), false));
    await send('test-co', failure(nextCustomer(), true));
    const after = await h.app.inject({ method: 'GET', url: '/metrics' });
    expect(value(after.body) - start).toBe(2);
    expect(after.body).not.toContain('live-co');
  });

  it('PATCH changes livemode; a rotation then gives the prefix of the new mode, and the old key keeps working', async () => {
    const created = await h.createTenant('mover-co');
    expect(created.publishable_key).toMatch(MODELESS_KEY);

    const toLive = await h.admin('PATCH', '/tenants/mover-co', { livemode: true });
    expect(toLive.statusCode).toBe(200);
    expect(toLive.json()).toMatchObject({ slug: 'mover-co', livemode: true });
    // The PATCH alone changes no key.
    expect((await h.lookup('mover-co', { key: created.publishable_key, customerId: 'cus_x' })).statusCode).toBe(200);

    const rotated = await h.admin('POST', '/tenants/mover-co/rotate', { key: 'publishable' });
    expect(rotated.statusCode).toBe(200);
    const liveKey = rotated.json().publishable_key as string;
    expect(liveKey).toMatch(LIVE_KEY);
    expect(rotated.json().livemode).toBe(true);
    for (const key of [liveKey, created.publishable_key])
      expect((await h.lookup('mover-co', { key, customerId: 'cus_x' })).statusCode).toBe(200);

    expect((await h.admin('PATCH', '/tenants/mover-co', { livemode: false })).json().livemode).toBe(false);
    const testKey = (await h.admin('POST', '/tenants/mover-co/rotate', { key: 'publishable' })).json()
      .publishable_key as string;
    expect(testKey).toMatch(TEST_KEY);
    for (const key of [liveKey, testKey])
      expect((await h.lookup('mover-co', { key, customerId: 'cus_x' })).statusCode).toBe(200);

    expect((await h.admin('PATCH', '/tenants/mover-co', { livemode: null })).json().livemode).toBeNull();
    const plainKey = (await h.admin('POST', '/tenants/mover-co/rotate', { key: 'publishable' })).json()
      .publishable_key as string;
    expect(plainKey).toMatch(MODELESS_KEY);
    // The key replaced works for the overlap, whatever its prefix and the tenant's mode now.
    for (const key of [testKey, plainKey])
      expect((await h.lookup('mover-co', { key, customerId: 'cus_x' })).statusCode).toBe(200);

    // Other fields leave livemode alone.
    await h.admin('PATCH', '/tenants/live-co', { hmac_required: false });
    expect((await h.admin('GET', '/tenants/live-co')).json().livemode).toBe(true);
  });

  it('400 invalid_request for a livemode that is not true, false or null, at creation and in a PATCH', async () => {
    for (const bad of ['live', 'true', 1, 0, {}, []]) {
      const created = await h.admin('POST', '/tenants', { slug: 'bad-mode', livemode: bad });
      expect(created.statusCode).toBe(400);
      expect(created.json()).toMatchObject({
        code: 'invalid_request',
        detail: 'livemode: must be true, false or null',
      });
      const patched = await h.admin('PATCH', '/tenants/live-co', { livemode: bad });
      expect(patched.statusCode).toBe(400);
      expect(patched.json()).toMatchObject({
        code: 'invalid_request',
        detail: 'livemode: must be true, false or null',
      });
    }
    expect((await h.admin('GET', '/tenants/bad-mode')).statusCode).toBe(404);
    expect((await h.admin('GET', '/tenants/live-co')).json().livemode).toBe(true);
  });

  it('the replay skips events of the other mode the same way, and counts them', async () => {
    const c1 = nextCustomer();
    const c2 = nextCustomer();
    const res = await h.admin('POST', '/tenants/live-co/stripe-events', {
      events: [
        failure(c1, false),
        failure(c2, true),
        event('product.created', { id: 'prod_2', object: 'product' }, { created: nowS(), livemode: true }),
      ],
    });
    expect(res.statusCode).toBe(200);
    const body = res.json() as {
      outcomes: Record<string, number>;
      results: string[];
      customers: { processor_customer_id: string }[];
    };
    expect(body.results).toEqual(['livemode_mismatch', 'applied', 'irrelevant']);
    expect(body.outcomes).toEqual({
      applied: 1,
      stale: 0,
      ignored: 0,
      pending: 0,
      duplicate: 0,
      irrelevant: 1,
      livemode_mismatch: 1,
    });
    expect(body.customers.map((x) => x.processor_customer_id)).toEqual([c2]);
    expect(await statusOf('live-co', c1)).toBe('active');
    expect(await statusOf('live-co', c2)).toBe('lockout');
  });

  it('the demo tenant, like any tenant created without the setting, takes both modes', async () => {
    const page = await seedDemo(h.store, new Date(h.clock.ms));
    expect(page?.publishableKey).toMatch(MODELESS_KEY);
    expect((await h.store.tenants.getTenant(DEMO_SLUG))?.livemode).toBeNull();
    expect((await h.admin('GET', `/tenants/${DEMO_SLUG}`)).json().livemode).toBeNull();
  });
  it("previews warning and lockout on a test tenant's lookup, with a sample lockout_at and its payment link; no other tenant previews", async () => {
    await h.admin('PATCH', '/tenants/test-co', {
      hmac_required: true,
      card_update_url: 'https://test.example/card',
      branding: { payment_url: 'https://test.example/pay' },
    });
    const cus = nextCustomer();
    const preview = (slug: string, value: string, extra: Record<string, string> = {}) =>
      h.lookup(slug, {
        key: keyOf(slug),
        customerId: cus,
        query: new URLSearchParams({ preview: value, ...extra }).toString(),
      });
    const week = new Date(Math.floor((h.clock.ms + 7 * 86_400_000) / 1000) * 1000).toISOString().replace('.000Z', 'Z');
    const warning = await preview('test-co', 'warning');
    expect(warning.statusCode).toBe(200);
    expect(warning.body).toBe(
      `{"status":"warning","card_update_url":"https://test.example/card","entitlements":{"powered_by_watermark":true,"custom_domain":false,"downstream_webhooks":false},"lockout_at":"${week}","pay_url":"https://test.example/pay"}`,
    );
    expect((await preview('test-co', 'lockout')).json()).toEqual({
      status: 'lockout',
      card_update_url: null,
      entitlements: { powered_by_watermark: true, custom_domain: false, downstream_webhooks: false },
      pay_url: 'https://test.example/pay',
    });
    // Without preview the hmac is required as configured; a wrong one is still refused.
    expect((await h.lookup('test-co', { key: keyOf('test-co'), customerId: cus })).json()).toMatchObject({
      code: 'hmac_required',
    });
    expect((await preview('test-co', 'lockout', { hmac: 'f'.repeat(64) })).statusCode).toBe(403);
    // Any other value, or any other tenant: an unknown parameter, the real answer.
    expect((await preview('test-co', 'active')).json()).toMatchObject({ code: 'hmac_required' });
    for (const slug of ['live-co', 'either-co']) {
      const res = await preview(slug, 'lockout');
      expect(res.statusCode).toBe(200);
      expect(res.body).toBe('{"status":"active"}');
    }
  });
});

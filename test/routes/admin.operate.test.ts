import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';

const engines = await availableEngines();

describe.each(engines)('operating a tenant base through the admin API ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant;

  beforeAll(async () => {
    h = await harness(engine);
    acme = await h.createTenant('acme');
    await h.createTenant('other-co');
    // 25 subscribers: 10 active, 8 warning, 7 lockout, reasons per status.
    for (let i = 0; i < 25; i += 1) {
      const status = i < 10 ? 'active' : i < 18 ? 'warning' : 'lockout';
      await h.setSubscriber(
        'acme',
        `cus_${String(i).padStart(3, '0')}`,
        status,
        status === 'lockout' ? 'hard_decline' : status === 'warning' ? 'soft_decline' : 'paid',
      );
      if (i === 17) h.clock.advance(60_000);
    }
    await h.setSubscriber('other-co', 'cus_other', 'lockout', 'hard_decline');
  });
  afterAll(() => h.close());

  const page = async (query: string) => {
    const res = await h.admin('GET', `/tenants/acme/subscribers${query}`);
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as {
      data: { processor_customer_id: string; status: string; reason: string; updated_at: string }[];
      next_cursor: string | null;
    };
  };

  it("lists who is locked out right now, a page at a time, and never another tenant's", async () => {
    const first = await page('?status=lockout&limit=4');
    expect(first.data.map((r) => r.processor_customer_id)).toEqual(['cus_018', 'cus_019', 'cus_020', 'cus_021']);
    expect(first.data.every((r) => r.status === 'lockout' && r.reason === 'hard_decline')).toBe(true);
    expect(first.next_cursor).toBe('cus_021');
    const second = await page(`?status=lockout&limit=4&cursor=${first.next_cursor ?? ''}`);
    expect(second.data.map((r) => r.processor_customer_id)).toEqual(['cus_022', 'cus_023', 'cus_024']);
    expect(second.next_cursor).toBeNull();
    const all = await page('');
    expect(all.data).toHaveLength(25);
    expect(all.data.some((r) => r.processor_customer_id === 'cus_other')).toBe(false);
    expect((await page('?reason=soft_decline')).data).toHaveLength(8);
    // Changed in the last minute: the ones set after the clock moved.
    const since = new Date(h.clock.ms - 1_000).toISOString();
    expect(
      (await page(`?updated_since=${encodeURIComponent(since)}`)).data.map((r) => r.processor_customer_id),
    ).toEqual(['cus_018', 'cus_019', 'cus_020', 'cus_021', 'cus_022', 'cus_023', 'cus_024']);
  });

  it('refuses a bad filter with the field named', async () => {
    for (const [query, field] of [
      ['?status=gone', 'status'],
      ['?limit=0', 'limit'],
      ['?limit=5000', 'limit'],
      ['?cursor=nope', 'cursor'],
      ['?updated_since=yesterday', 'updated_since'],
      ['?colour=red', 'colour'],
    ] as const) {
      const res = await h.admin('GET', `/tenants/acme/subscribers${query}`);
      expect(res.statusCode, query).toBe(400);
      expect((res.json() as { code: string; detail: string }).detail, query).toContain(field);
    }
    expect((await h.admin('GET', '/tenants/nobody-co/subscribers')).statusCode).toBe(404);
  });

  it('shows a tenant with its credentials in force, whether Stripe can deliver, and its subscribers by status', async () => {
    let shown = (await h.admin('GET', '/tenants/acme')).json() as {
      stripe_webhook_secret_set: boolean;
      credentials: { kind: string; expires_at: string | null }[];
      subscriber_counts: Record<string, number>;
    };
    expect(shown.stripe_webhook_secret_set).toBe(false);
    expect(shown.subscriber_counts).toEqual({ active: 10, warning: 8, lockout: 7 });
    expect(shown.credentials.map((c) => [c.kind, c.expires_at])).toEqual([
      ['hmac_secret', null],
      ['publishable_key', null],
    ]);
    expect(JSON.stringify(shown)).not.toContain(acme.publishable_key);
    expect(JSON.stringify(shown)).not.toContain(acme.hmac_secret);
    await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: 'whsec_operate_0123456789abcdef' });
    await h.admin('POST', '/tenants/acme/rotate', { key: 'publishable' });
    shown = (await h.admin('GET', '/tenants/acme')).json() as typeof shown;
    expect(shown.stripe_webhook_secret_set).toBe(true);
    const keys = shown.credentials.filter((c) => c.kind === 'publishable_key');
    // The replaced key, still in its overlap, and the new one.
    expect(keys.map((k) => k.expires_at === null)).toEqual([false, true]);
    expect(JSON.stringify(shown)).not.toContain('whsec_operate');
  });

  it('deletes a tenant with everything it owns; its lookups then find no tenant', async () => {
    const doomed = await h.createTenant('doomed-co');
    await h.setSubscriber('doomed-co', 'cus_d1', 'lockout');
    expect((await h.lookup('doomed-co', { key: doomed.publishable_key, customerId: 'cus_d1' })).json()).toMatchObject({
      status: 'lockout',
    });
    expect((await h.admin('DELETE', '/tenants/doomed-co')).statusCode).toBe(204);
    expect((await h.admin('GET', '/tenants/doomed-co')).statusCode).toBe(404);
    expect((await h.lookup('doomed-co', { key: doomed.publishable_key, customerId: 'cus_d1' })).statusCode).toBe(404);
    expect((await h.admin('DELETE', '/tenants/doomed-co')).statusCode).toBe(404);
    // A new tenant of the same slug starts empty.
    const again = await h.createTenant('doomed-co');
    expect((await h.lookup('doomed-co', { key: again.publishable_key, customerId: 'cus_d1' })).body).toBe(
      '{"status":"active"}',
    );
    expect((await h.admin('GET', '/tenants/doomed-co/subscribers/cus_d1')).statusCode).toBe(404);
  });

  it('deletes a tier only when no tenant is on it', async () => {
    expect(
      (
        await h.admin('PUT', '/tiers/trial', {
          entitlements: { powered_by_watermark: true, custom_domain: false, downstream_webhooks: false },
        })
      ).statusCode,
    ).toBe(200);
    await h.admin('PATCH', '/tenants/other-co', { tier: 'trial' });
    const refused = await h.admin('DELETE', '/tiers/trial');
    expect([refused.statusCode, (refused.json() as { code: string }).code]).toEqual([409, 'tier_in_use']);
    await h.admin('PATCH', '/tenants/other-co', { tier: 'starter' });
    expect((await h.admin('DELETE', '/tiers/trial')).statusCode).toBe(204);
    expect((await h.admin('GET', '/tiers')).json()).not.toMatchObject({
      data: expect.arrayContaining([expect.objectContaining({ name: 'trial' })]),
    });
    const gone = await h.admin('DELETE', '/tiers/trial');
    expect([gone.statusCode, (gone.json() as { code: string }).code]).toEqual([404, 'tier_not_found']);
  });
});

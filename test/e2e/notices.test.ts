import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeHmac } from '../../src/domain/hmac.js';
import { availableEngines, schemaScopedUrl } from '../helpers/engines.js';
import { REQUEST_TIMEOUT_MS, adminCall, killAllServices, startServiceProcess } from '../helpers/service-process.js';
import type { ServiceProcess } from '../helpers/service-process.js';
import { customer, event, invoice, signed } from '../helpers/stripe-fixtures.js';
import type { StripeEventFixture } from '../helpers/stripe-fixtures.js';

/**
 * The card-expiring notice (docs/notices.md) through a real service process on PostgreSQL:
 * Stripe's signed events in at the webhook, the lookup's answers out.
 */

const TOKEN = 'notices-test-admin-token-0123456789abcdefgh';
const SECRET = 'whsec_notices_0123456789abcdefghijklmnopq';
const CARD_PAGE = 'https://billing.example.com/card';
const engines = await availableEngines();

interface Tenant {
  slug: string;
  publishableKey: string;
  hmacSecret: string;
}

/** The card of a customer, expiring at the end of next month (UTC), as Stripe's `customer.source.expiring` carries it. */
function expiringCard(customerId: string): { object: Record<string, unknown>; expires: string } {
  const now = new Date();
  const next = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
  const month = next.getUTCMonth() + 1;
  const year = next.getUTCFullYear();
  return {
    object: {
      id: `card_${customerId.slice(4)}`,
      object: 'card',
      brand: 'Visa',
      last4: '4242',
      customer: customerId,
      exp_month: month,
      exp_year: year,
    },
    expires: `${year}-${String(month).padStart(2, '0')}`,
  };
}

afterAll(killAllServices);

describe.each(engines.filter((e) => e.name === 'postgres'))('the card-expiring notice, served ($name)', () => {
  let service: ServiceProcess;
  let drop: () => Promise<void>;
  let url: string;
  let withNotices: Tenant;
  let without: Tenant;
  let created = Math.floor(Date.now() / 1000) - 600;
  const at = () => (created += 1);

  const admin = async (method: string, path: string, body?: unknown): Promise<Record<string, unknown>> => {
    const res = await adminCall(service.base, TOKEN, method, path, body);
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  };

  async function newTenant(slug: string, policy: Record<string, unknown>): Promise<Tenant> {
    const t = await admin('POST', '/tenants', { slug, card_update_url: CARD_PAGE, policy });
    await admin('PATCH', `/tenants/${slug}`, { stripe_webhook_secret: SECRET });
    return { slug, publishableKey: String(t.publishable_key), hmacSecret: String(t.hmac_secret) };
  }

  async function deliver(t: Tenant, fixture: StripeEventFixture): Promise<string> {
    const { payload, signature } = signed(fixture, SECRET, Math.floor(Date.now() / 1000));
    const res = await fetch(`${service.base}/webhooks/stripe/${t.slug}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      body: payload,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { outcome: string }).outcome;
  }

  async function lookup(t: Tenant, customerId: string, sign: boolean): Promise<Record<string, unknown>> {
    const hmac = sign ? `&hmac=${computeHmac(t.hmacSecret, customerId)}` : '';
    const res = await fetch(
      `${service.base}/api/subscriber-status/${t.slug}?processor_customer_id=${customerId}${hmac}`,
      {
        headers: { authorization: `Bearer ${t.publishableKey}` },
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      },
    );
    expect(res.status).toBe(200);
    return (await res.json()) as Record<string, unknown>;
  }

  beforeAll(async () => {
    const scoped = await schemaScopedUrl('notices');
    drop = scoped.drop;
    url = scoped.url;
    service = await startServiceProcess(scoped.url, TOKEN, { DUNWALL_RATE_LIMIT_FAILURES_PER_IP: '0' });
    withNotices = await newTenant('notices-on', { notices: ['card_expiring'] });
    without = await newTenant('notices-off', {});
  }, 120_000);

  afterAll(async () => {
    await killAllServices();
    await drop?.();
  });

  it('shows policy.notices with the tenant, and a PATCH sets and clears it', async () => {
    expect(((await admin('GET', '/tenants/notices-on')).policy as { notices: string[] }).notices).toEqual([
      'card_expiring',
    ]);
    expect(((await admin('GET', '/tenants/notices-off')).policy as { notices: string[] }).notices).toEqual([]);
    const refused = await adminCall(service.base, TOKEN, 'PATCH', '/tenants/notices-off', {
      policy: { notices: ['card_lost'] },
    });
    expect(refused.status).toBe(400);
  });

  it('a signed lookup of an active customer carries the notice and the card link; an unsigned one does not', async () => {
    const cus = 'cus_noticeSigned';
    const card = expiringCard(cus);
    expect(await deliver(withNotices, event('customer.source.expiring', card.object, { created: at() }))).toBe(
      'applied',
    );
    expect(await lookup(withNotices, cus, true)).toEqual({
      status: 'active',
      card_update_url: CARD_PAGE,
      entitlements: expect.any(Object),
      notice: { kind: 'card_expiring', expires: card.expires },
    });
    // Unsigned: as any customer Dunwall knows no status of.
    expect(await lookup(withNotices, cus, false)).toEqual({ status: 'active' });
    // Told again by a new event: nothing to change.
    expect(await deliver(withNotices, event('customer.source.expiring', card.object, { created: at() }))).toBe(
      'ignored',
    );
    expect((await lookup(withNotices, cus, true)).notice).toEqual({ kind: 'card_expiring', expires: card.expires });
  });

  it('a redelivered event is a duplicate', async () => {
    const cus = 'cus_noticeTwice';
    const fixture = event('customer.source.expiring', expiringCard(cus).object, { created: at() });
    expect(await deliver(withNotices, fixture)).toBe('applied');
    expect(await deliver(withNotices, fixture)).toBe('duplicate');
  });

  it('a tenant without notices never shows it', async () => {
    const cus = 'cus_noticeOff';
    expect(await deliver(without, event('customer.source.expiring', expiringCard(cus).object, { created: at() }))).toBe(
      'applied',
    );
    const answer = await lookup(without, cus, true);
    expect(answer.notice).toBeUndefined();
    expect(answer).toEqual({ status: 'active' });
  });

  it("a warning subscriber's answer does not carry it, and the status stays what it is", async () => {
    const cus = 'cus_noticeWarning';
    await admin('PUT', `/tenants/${withNotices.slug}/subscribers/${cus}`, { status: 'warning' });
    await deliver(withNotices, event('customer.source.expiring', expiringCard(cus).object, { created: at() }));
    const answer = await lookup(withNotices, cus, true);
    expect(answer.status).toBe('warning');
    expect(answer.notice).toBeUndefined();
    // Back to active: the notice shows again.
    await admin('PUT', `/tenants/${withNotices.slug}/subscribers/${cus}`, { status: 'active' });
    expect((await lookup(withNotices, cus, true)).notice).toEqual({
      kind: 'card_expiring',
      expires: expiringCard(cus).expires,
    });
  });

  it('a known active subscriber keeps its answer, with the notice added', async () => {
    const cus = 'cus_noticeKnown';
    await admin('PUT', `/tenants/${withNotices.slug}/subscribers/${cus}`, { status: 'active' });
    const before = await lookup(withNotices, cus, true);
    await deliver(withNotices, event('customer.source.expiring', expiringCard(cus).object, { created: at() }));
    expect(await lookup(withNotices, cus, true)).toEqual({
      ...before,
      card_update_url: CARD_PAGE,
      notice: { kind: 'card_expiring', expires: expiringCard(cus).expires },
    });
    expect(await lookup(withNotices, cus, false)).toEqual(before);
  });

  it('a card change ends it, and an older expiring event arriving late does not start it again', async () => {
    const cus = 'cus_noticeCardChange';
    const card = expiringCard(cus);
    const first = at();
    await deliver(withNotices, event('customer.source.expiring', card.object, { created: first }));
    expect((await lookup(withNotices, cus, true)).notice).toBeDefined();
    const changed = event('customer.updated', customer(cus), {
      created: at(),
      previous: { invoice_settings: { default_payment_method: 'pm_oldCard' } },
    });
    expect(await deliver(withNotices, changed)).toBe('applied');
    expect((await lookup(withNotices, cus, true)).notice).toBeUndefined();
    expect(await deliver(withNotices, event('customer.source.expiring', card.object, { created: first - 60 }))).toBe(
      'stale',
    );
    expect((await lookup(withNotices, cus, true)).notice).toBeUndefined();
  });

  it("the renewal's invoice.paid ends it", async () => {
    const cus = 'cus_noticeRenewal';
    await deliver(withNotices, event('customer.source.expiring', expiringCard(cus).object, { created: at() }));
    expect((await lookup(withNotices, cus, true)).notice).toBeDefined();
    await deliver(withNotices, event('invoice.paid', invoice(cus, { status: 'paid' }), { created: at() }));
    const answer = await lookup(withNotices, cus, true);
    expect(answer.status).toBe('active');
    expect(answer.notice).toBeUndefined();
  });

  it('turning the policy off hides every notice at once, and on again shows them', async () => {
    const cus = 'cus_noticeToggle';
    await deliver(withNotices, event('customer.source.expiring', expiringCard(cus).object, { created: at() }));
    expect((await lookup(withNotices, cus, true)).notice).toBeDefined();
    await admin('PATCH', `/tenants/${withNotices.slug}`, { policy: { notices: [] } });
    expect((await lookup(withNotices, cus, true)).notice).toBeUndefined();
    await admin('PATCH', `/tenants/${withNotices.slug}`, { policy: { notices: ['card_expiring'] } });
    expect((await lookup(withNotices, cus, true)).notice).toBeDefined();
  });

  it('a restarted service loads the notices that hold from the database', async () => {
    const cus = 'cus_noticeSigned';
    service.child.kill('SIGKILL');
    await service.exited;
    service = await startServiceProcess(url, TOKEN, { DUNWALL_RATE_LIMIT_FAILURES_PER_IP: '0' });
    expect((await lookup(withNotices, cus, true)).notice).toEqual({
      kind: 'card_expiring',
      expires: expiringCard(cus).expires,
    });
    expect(await lookup(withNotices, cus, false)).toEqual({ status: 'active' });
    expect((await lookup(withNotices, 'cus_noticeCardChange', true)).notice).toBeUndefined();
  }, 120_000);
});

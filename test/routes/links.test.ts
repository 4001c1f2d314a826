import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/app.js';
import type { App } from '../../src/http/app.js';
import { ReadModel } from '../../src/readmodel/index.js';
import { DEFAULT_RATE_LIMITS } from '../../src/runtime/config.js';
import type { LinkTarget, LinkRedirect, StripeLinks } from '../../src/services/stripe-links.js';
import type { Store } from '../../src/store/index.js';
import { availableEngines } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { ADMIN_TOKEN, FakeClock, adminRequest, computeHmac } from '../helpers/harness.js';
import type { CreatedTenant } from '../helpers/harness.js';
import { portOf, socketRequest } from '../helpers/socket.js';
import { event, hostedInvoiceUrl, invoice, paymentIds, signed } from '../helpers/stripe-fixtures.js';
import type { PaymentIds, StripeEventFixture } from '../helpers/stripe-fixtures.js';

/**
 * Pay links through Dunwall (docs/links.md), through the signed webhook, the lookup and the
 * links on a real socket, on a fake clock, on both engines. Stripe is a fake at the
 * StripeLinks interface that the routes take: its `open` answers a fresh page, fails, or
 * never answers, as the test says.
 */
const engines = await availableEngines();
const SECRET = 'whsec_links_tests_0123456789abcdef';
const DAY_MS = 86_400_000;
const LINK_RE = /^http:\/\/127\.0\.0\.1:\d+\/pay\/([0-9A-Za-z]{32})$/;

/** Stands in for the Stripe client behind the links: what it answers is the test's to set. */
class FakeStripeLinks implements StripeLinks {
  mode: 'up' | 'down' = 'up';
  readonly calls: LinkTarget[] = [];
  open(target: LinkTarget): Promise<LinkRedirect> {
    this.calls.push(target);
    if (this.mode === 'down') return Promise.resolve({ ok: false, reason: 'stripe_error' });
    return Promise.resolve({
      ok: true,
      location: `https://invoice.stripe.com/i/acct_1TestAccount0000/fresh_${target.invoiceId ?? 'card'}`,
    });
  }
}

describe.each(engines)('pay links through Dunwall ($name)', (engine: Engine) => {
  let app: App;
  let model: ReadModel;
  let store: Store;
  let cleanup: () => Promise<void>;
  const clock = new FakeClock();
  const stripe = new FakeStripeLinks();
  let base = '';
  let t: CreatedTenant;
  let plain: CreatedTenant;
  let spaceId = 0;
  const nowS = () => Math.floor(clock.ms / 1000);

  const admin = (method: string, url: string, body?: unknown) => adminRequest(app, method, url, body);

  async function tenant(slug: string): Promise<CreatedTenant> {
    const res = await admin('POST', '/tenants', { slug });
    expect(res.statusCode).toBe(201);
    expect((await admin('PATCH', `/tenants/${slug}`, { stripe_webhook_secret: SECRET })).statusCode).toBe(200);
    return res.json() as CreatedTenant;
  }

  async function send(slug: string, fixture: StripeEventFixture): Promise<void> {
    const { payload, signature } = signed(fixture, SECRET, nowS());
    const res = await socketRequest(
      app,
      'POST',
      `/webhooks/stripe/${slug}`,
      { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': signature },
      payload,
    );
    expect(res.statusCode).toBe(200);
    await model.catchUp();
  }

  /** A lockout (retries exhausted) whose invoice was finalized `finalizedDaysAgo` ago, charged automatically. */
  const lockout = (cus: string, ids: PaymentIds, finalizedDaysAgo: number) =>
    event(
      'invoice.payment_failed',
      {
        ...invoice(cus, { ids, next_payment_attempt: null }),
        status_transitions: { finalized_at: nowS() - finalizedDaysAgo * 86_400 },
      },
      { created: nowS() },
    );

  function lookup(tenantOf: CreatedTenant, cus: string) {
    const q = new URLSearchParams({ processor_customer_id: cus, hmac: computeHmac(tenantOf.hmac_secret, cus) });
    return socketRequest(app, 'GET', `/api/subscriber-status/${tenantOf.slug}?${q}`, {
      authorization: `Bearer ${tenantOf.publishable_key}`,
    });
  }

  const open = (path: string, headers: Record<string, string> = {}) => socketRequest(app, 'GET', path, headers);
  const pathOf = (link: string) => new URL(link).pathname;

  beforeAll(async () => {
    const opened = await engine.open();
    store = opened.store as Store;
    model = await ReadModel.open(store.changes, { now: clock.now });
    app = await buildApp({ store, model, adminToken: ADMIN_TOKEN, now: clock.now, stripeLinks: stripe });
    await app.ready();
    base = `http://127.0.0.1:${await portOf(app)}`;
    cleanup = async () => {
      await app.close();
      await model.close();
      await opened.cleanup();
    };
    t = await tenant('links');
    plain = await tenant('nokey');
    spaceId = model.tenant('links')?.id ?? 0;
    // As boot records DUNWALL_PUBLIC_URL, and as the Stripe API key's set tells of it.
    await store.links.setPublicUrl(base, new Date(clock.ms));
    await store.stripeApiKeys.setStripeApiKey(
      spaceId,
      'rk_live_000000000000000000000000',
      'rk_live_0000',
      new Date(clock.ms),
      { kind: 'operator' },
    );
    while ((await store.maintenance.sweepPolicy(new Date(clock.ms), 500)).pending);
  }, 120_000);
  afterAll(() => cleanup());

  const customers = { expired: 'cus_lnk_expired', fresh: 'cus_lnk_fresh', nokey: 'cus_lnk_nokey' };
  const ids = { expired: paymentIds(), fresh: paymentIds(), nokey: paymentIds() };
  let expiredLink = '';

  it('answers a lockout whose stored page expired with the Dunwall link, built once, and opens it to the fresh page', async () => {
    await send('links', lockout(customers.expired, ids.expired, 40));
    const answer = await lookup(t, customers.expired);
    expect(answer.statusCode).toBe(200);
    const payUrl = (answer.json() as { pay_url: string }).pay_url;
    expect(payUrl).toMatch(LINK_RE);
    // The subscriber's record carries the same link.
    const record = await admin('GET', `/tenants/links/subscribers/${customers.expired}`);
    expect((record.json() as { pay_url: string }).pay_url).toBe(payUrl);
    expiredLink = payUrl;
    // The answer's bytes are built once: the read model serves the same Buffer again.
    const tenantAuth = model.tenant('links');
    if (tenantAuth === null) throw new Error('tenant');
    const first = model.answer(tenantAuth, customers.expired, true, clock.ms);
    expect(model.answer(tenantAuth, customers.expired, true, clock.ms)).toBe(first);
    expect((await lookup(t, customers.expired)).body).toBe(answer.body);

    // Without a key, the stored hosted page, as before.
    await send('nokey', lockout(customers.nokey, ids.nokey, 40));
    expect((await lookup(plain, customers.nokey)).json()).toMatchObject({
      pay_url: hostedInvoiceUrl(ids.nokey.invoice),
    });

    stripe.mode = 'up';
    const res = await open(pathOf(payUrl), { 'accept-language': 'fr' });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(
      `https://invoice.stripe.com/i/acct_1TestAccount0000/fresh_${ids.expired.invoice}`,
    );
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(stripe.calls.at(-1)).toMatchObject({
      kind: 'pay',
      spaceId,
      customerId: customers.expired,
      invoiceId: ids.expired.invoice,
      locale: 'fr',
    });
  });

  it('sends the customer somewhere useful when Stripe is down: the stored page, the payment link, or the contact page', async () => {
    stripe.mode = 'down';
    // The stored page is known to have expired (finalized 40 days ago), and no payment link: the page.
    const page = await open(pathOf(expiredLink), { 'accept-language': 'de-CH, fr;q=0.5' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toMatch(/^default-src 'none'/);
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.headers['referrer-policy']).toBe('no-referrer');
    expect(page.body).toContain('<html lang="de">');

    // With a payment link and a support link in the branding, in French and German.
    const branding = {
      payment_url: 'https://acme.test/billing',
      support_url: 'https://acme.test/help',
      texts: { fr: { support: 'Écrivez-nous' } },
    };
    expect(
      (
        await admin('PATCH', '/tenants/links', {
          branding: { support_url: branding.support_url, texts: branding.texts },
        })
      ).statusCode,
    ).toBe(200);
    await model.catchUp();
    const contact = await open(pathOf(expiredLink), { 'accept-language': 'fr-FR,fr;q=0.9' });
    expect(contact.statusCode).toBe(200);
    expect(contact.body).toContain('<html lang="fr">');
    expect(contact.body).toContain('<a href="https://acme.test/help" rel="noreferrer">Écrivez-nous</a>');
    expect((await admin('PATCH', '/tenants/links', { branding })).statusCode).toBe(200);
    await model.catchUp();
    const toPaymentLink = await open(pathOf(expiredLink));
    expect(toPaymentLink.statusCode).toBe(303);
    expect(toPaymentLink.headers.location).toBe(branding.payment_url);

    // A stored page not known to have expired (finalized a day ago) is the first way out.
    await send('links', lockout(customers.fresh, ids.fresh, 1));
    const freshLink = (await lookup(t, customers.fresh)).json() as { pay_url: string };
    expect(freshLink.pay_url).toMatch(LINK_RE);
    const stored = await open(pathOf(freshLink.pay_url));
    expect(stored.statusCode).toBe(303);
    expect(stored.headers.location).toBe(hostedInvoiceUrl(ids.fresh.invoice));
    stripe.mode = 'up';
  });

  it('answers an unknown, forged or misplaced token with the 410 page, and never a 5xx', async () => {
    const token = LINK_RE.exec(expiredLink)?.[1] ?? '';
    const forged = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
    for (const path of [`/pay/${forged}`, '/pay/short', `/card/${token}`, `/pay/${'x'.repeat(300)}`]) {
      const res = await open(path);
      expect(res.statusCode, path).toBe(410);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.body).toContain('<!doctype html>');
    }
    // A path the router cannot decode is refused before any route: still no 5xx.
    expect((await open('/pay/%00%ff')).statusCode).toBeLessThan(500);
  });

  it('counts the opens: the runs whose customer opened a link, those recovered after it, the time to payment', async () => {
    clock.advance(3_600_000);
    await send(
      'links',
      event('invoice.paid', invoice(customers.expired, { ids: ids.expired, status: 'paid' }), { created: nowS() }),
    );
    expect((await lookup(t, customers.expired)).json()).toMatchObject({ status: 'active' });
    const res = await admin('GET', '/tenants/links/analytics/recovery?granularity=month&from=2026-01-01&to=2026-02-01');
    expect(res.statusCode, res.body).toBe(200);
    const figures = (res.json() as { links: unknown }).links;
    process.stdout.write(`${engine.name} link figures: ${JSON.stringify(figures)}\n`);
    // cus_lnk_expired opened at T0 and paid an hour later; cus_lnk_fresh opened and is still in dunning.
    expect(figures).toEqual({
      opened: 2,
      recovered_after_open: 1,
      median_seconds_to_payment: 3600,
      periods: [
        {
          period_start: '2026-01-01T00:00:00.000Z',
          opened: 2,
          recovered_after_open: 1,
          median_seconds_to_payment: 3600,
        },
      ],
    });
  });

  it('renews a link before it expires while its subscriber is in dunning, and the old one ends on its day', async () => {
    const before = ((await lookup(t, customers.fresh)).json() as { pay_url: string }).pay_url;
    clock.advance(20 * DAY_MS);
    expect(await store.links.renewDue(new Date(clock.ms), 100)).toBe(0);
    clock.advance(4 * DAY_MS);
    expect(await store.links.renewDue(new Date(clock.ms), 100)).toBe(1);
    await model.catchUp();
    const after = (await lookup(t, customers.fresh)).json() as { pay_url: string; status: string };
    expect(after.status).toBe('lockout');
    expect(after.pay_url).toMatch(LINK_RE);
    expect(after.pay_url).not.toBe(before);
    expect(await store.links.renewDue(new Date(clock.ms), 100)).toBe(0);
    // The old link still opens until its 30 days are over, then gets the 410 page.
    expect((await open(pathOf(before))).statusCode).toBe(303);
    clock.advance(7 * DAY_MS);
    expect((await open(pathOf(before))).statusCode).toBe(410);
    expect((await open(pathOf(after.pay_url))).statusCode).toBe(303);
  });

  it('gives the stored page back once the key is removed', async () => {
    await store.stripeApiKeys.deleteStripeApiKey(spaceId, new Date(clock.ms), { kind: 'operator' });
    while ((await store.maintenance.sweepPolicy(new Date(clock.ms), 500)).pending);
    await model.catchUp();
    expect((await lookup(t, customers.fresh)).json()).toMatchObject({ pay_url: hostedInvoiceUrl(ids.fresh.invoice) });
  });

  it('limits the opens per address', async () => {
    const limited = await buildApp({
      store,
      model,
      now: clock.now,
      stripeLinks: stripe,
      rateLimits: { ...DEFAULT_RATE_LIMITS, lookupPerIp: 3 },
    });
    try {
      const answers: number[] = [];
      for (let i = 0; i < 4; i += 1)
        answers.push((await socketRequest(limited, 'GET', `/pay/${'a'.repeat(32)}`)).statusCode);
      expect(answers).toEqual([410, 410, 410, 429]);
    } finally {
      await limited.close();
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/app.js';
import type { App } from '../../src/http/app.js';
import { ReadModel } from '../../src/readmodel/index.js';
import type { LinkRedirect, LinkTarget, StripeLinks } from '../../src/services/stripe-links.js';
import type { Store } from '../../src/store/index.js';
import { availableEngines } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { ADMIN_TOKEN, FakeClock, adminRequest, computeHmac } from '../helpers/harness.js';
import type { CreatedTenant } from '../helpers/harness.js';
import { portOf, socketRequest } from '../helpers/socket.js';
import { event, invoice, paymentIds, signed } from '../helpers/stripe-fixtures.js';
import type { StripeEventFixture } from '../helpers/stripe-fixtures.js';

/**
 * Card links through Dunwall (docs/links.md): in a space with a Stripe API key, a warning's
 * `card_update_url` and a card-expiring notice's card link are `{DUNWALL_PUBLIC_URL}/card/{token}`
 * unless the tenant set its own card update URL; made on the write path, renewed before they
 * end, and gone once the key is removed. Through the signed webhook, the lookup and /card on a
 * real socket, on a fake clock, on both engines. Stripe is a fake at the StripeLinks interface.
 */
const engines = await availableEngines();
const SECRET = 'whsec_card_links_tests_0123456789ab';
const DAY_MS = 86_400_000;
const CARD_RE = /^http:\/\/127\.0\.0\.1:\d+\/card\/[0-9A-Za-z]{32}$/;
const OWN_CARD_URL = 'https://acme.test/billing/card';

class FakeStripeLinks implements StripeLinks {
  readonly calls: LinkTarget[] = [];
  open(target: LinkTarget): Promise<LinkRedirect> {
    this.calls.push(target);
    return Promise.resolve({
      ok: true,
      location: `https://billing.stripe.com/p/session/test_for_${target.customerId}`,
    });
  }
}

interface Answer {
  status: string;
  card_update_url: string | null;
  pay_url?: string;
  notice?: { kind: string; expires: string };
}

describe.each(engines)('card links through Dunwall ($name)', (engine: Engine) => {
  let app: App;
  let model: ReadModel;
  let store: Store;
  let cleanup: () => Promise<void>;
  const clock = new FakeClock();
  const stripe = new FakeStripeLinks();
  let t: CreatedTenant;
  let plain: CreatedTenant;
  let spaceId = 0;
  const nowS = () => Math.floor(clock.ms / 1000);
  const admin = (method: string, url: string, body?: unknown) => adminRequest(app, method, url, body);

  async function tenant(slug: string): Promise<CreatedTenant> {
    const res = await admin('POST', '/tenants', { slug });
    expect(res.statusCode).toBe(201);
    const patch = { stripe_webhook_secret: SECRET, policy: { notices: ['card_expiring'] } };
    expect((await admin('PATCH', `/tenants/${slug}`, patch)).statusCode).toBe(200);
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

  /** A failed attempt: retried (a warning) or the last (a lockout). */
  const failed = (cus: string, retry: boolean) =>
    event(
      'invoice.payment_failed',
      { ...invoice(cus, { ids: paymentIds(), next_payment_attempt: retry ? nowS() + 3 * 86_400 : null }) },
      { created: nowS() },
    );

  /** The customer's card expires at the end of the month after the clock's. */
  const expiring = (cus: string) => {
    const d = new Date(clock.ms);
    const month = d.getUTCMonth() + 2;
    const card = {
      object: 'card',
      customer: cus,
      exp_month: month > 12 ? month - 12 : month,
      exp_year: d.getUTCFullYear() + (month > 12 ? 1 : 0),
    };
    return event('customer.source.expiring', card, { created: nowS() });
  };

  async function lookup(of: CreatedTenant, cus: string, signedLookup = true): Promise<Answer> {
    const q = new URLSearchParams({ processor_customer_id: cus });
    if (signedLookup) q.set('hmac', computeHmac(of.hmac_secret, cus));
    const res = await socketRequest(app, 'GET', `/api/subscriber-status/${of.slug}?${q}`, {
      authorization: `Bearer ${of.publishable_key}`,
    });
    expect(res.statusCode).toBe(200);
    return res.json() as Answer;
  }

  const open = (link: string) => socketRequest(app, 'GET', new URL(link).pathname, {});
  const sweep = async () => {
    while ((await store.maintenance.sweepPolicy(new Date(clock.ms), 500)).pending);
    await model.catchUp();
  };

  beforeAll(async () => {
    const opened = await engine.open();
    store = opened.store as Store;
    model = await ReadModel.open(store.changes, { now: clock.now });
    app = await buildApp({ store, model, adminToken: ADMIN_TOKEN, now: clock.now, stripeLinks: stripe });
    await app.ready();
    const base = `http://127.0.0.1:${await portOf(app)}`;
    cleanup = async () => {
      await app.close();
      await model.close();
      await opened.cleanup();
    };
    t = await tenant('cards');
    plain = await tenant('nokey');
    spaceId = model.tenant('cards')?.id ?? 0;
    // As boot records DUNWALL_PUBLIC_URL, and as setting the Stripe API key does.
    await store.links.setPublicUrl(base, new Date(clock.ms));
    await store.stripeApiKeys.setStripeApiKey(
      spaceId,
      'rk_live_000000000000000000000000',
      'rk_live_0000',
      new Date(clock.ms),
      { kind: 'operator' },
    );
    await sweep();
  }, 120_000);
  afterAll(() => cleanup());

  let warnedLink = '';
  let noticeLink = '';

  it("answers a warning's signed lookup with the card link, opened on the portal for that customer", async () => {
    await send('cards', failed('cus_card_warn', true));
    const answer = await lookup(t, 'cus_card_warn');
    expect(answer.status).toBe('warning');
    expect(answer.card_update_url).toMatch(CARD_RE);
    expect(answer.pay_url).toMatch(/\/pay\//);
    warnedLink = answer.card_update_url ?? '';
    // Only where pay_url could be given: an unsigned lookup carries none.
    expect(await lookup(t, 'cus_card_warn', false)).toMatchObject({ status: 'warning', card_update_url: null });
    // Built once, not per lookup: the read model serves the same bytes again.
    const auth = model.tenant('cards');
    if (auth === null) throw new Error('tenant');
    expect(model.answer(auth, 'cus_card_warn', true, clock.ms)).toBe(
      model.answer(auth, 'cus_card_warn', true, clock.ms),
    );

    const res = await open(warnedLink);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('https://billing.stripe.com/p/session/test_for_cus_card_warn');
    expect(stripe.calls.at(-1)).toMatchObject({ kind: 'card', spaceId, customerId: 'cus_card_warn', invoiceId: null });
    // A card link is no pay link.
    expect(
      (await socketRequest(app, 'GET', new URL(warnedLink).pathname.replace('/card/', '/pay/'), {})).statusCode,
    ).toBe(410);
  });

  it("carries none on a lockout, and none without a key; the tenant's own URL wins over it", async () => {
    await send('cards', failed('cus_card_lock', false));
    expect(await lookup(t, 'cus_card_lock')).toMatchObject({ status: 'lockout', card_update_url: null });
    await send('nokey', failed('cus_card_nokey', true));
    expect(await lookup(plain, 'cus_card_nokey')).toMatchObject({ status: 'warning', card_update_url: null });

    expect((await admin('PATCH', '/tenants/cards', { card_update_url: OWN_CARD_URL })).statusCode).toBe(200);
    await model.catchUp();
    expect(await lookup(t, 'cus_card_warn')).toMatchObject({ card_update_url: OWN_CARD_URL });
    expect((await admin('PATCH', '/tenants/cards', { card_update_url: null })).statusCode).toBe(200);
    await model.catchUp();
    expect(await lookup(t, 'cus_card_warn')).toMatchObject({ card_update_url: warnedLink });
  });

  it('gives a card-expiring notice the card link', async () => {
    await send('cards', expiring('cus_card_notice'));
    const answer = await lookup(t, 'cus_card_notice');
    expect(answer).toMatchObject({ status: 'active', notice: { kind: 'card_expiring' } });
    expect(answer.card_update_url).toMatch(CARD_RE);
    noticeLink = answer.card_update_url ?? '';
    expect(await lookup(t, 'cus_card_notice', false)).toEqual(
      expect.not.objectContaining({ notice: expect.anything() }),
    );
    const res = await open(noticeLink);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('https://billing.stripe.com/p/session/test_for_cus_card_notice');
    // Without a key, the notice carries the tenant's own URL or none.
    await send('nokey', expiring('cus_card_notice'));
    expect(await lookup(plain, 'cus_card_notice')).toMatchObject({
      notice: { kind: 'card_expiring' },
      card_update_url: null,
    });
  });

  it('renews the card links before they end; the old ones still open until their day', async () => {
    clock.advance(22 * DAY_MS);
    expect(await store.links.renewDue(new Date(clock.ms), 100)).toBe(0);
    clock.advance(2 * DAY_MS);
    // The warned and locked-out subscribers (pay and card links), and the notice.
    expect(await store.links.renewDue(new Date(clock.ms), 100)).toBe(3);
    await model.catchUp();
    const warned = await lookup(t, 'cus_card_warn');
    expect(warned.card_update_url).toMatch(CARD_RE);
    expect(warned.card_update_url).not.toBe(warnedLink);
    const noticed = await lookup(t, 'cus_card_notice');
    expect(noticed.card_update_url).toMatch(CARD_RE);
    expect(noticed.card_update_url).not.toBe(noticeLink);
    expect(await store.links.renewDue(new Date(clock.ms), 100)).toBe(0);
    expect((await open(warnedLink)).statusCode).toBe(303);
    clock.advance(6 * DAY_MS);
    expect((await open(warnedLink)).statusCode).toBe(410);
    warnedLink = warned.card_update_url ?? '';
  });

  it('takes the card links away once the key is removed', async () => {
    await store.stripeApiKeys.deleteStripeApiKey(spaceId, new Date(clock.ms), { kind: 'operator' });
    await sweep();
    expect(await lookup(t, 'cus_card_warn')).toMatchObject({ status: 'warning', card_update_url: null });
    expect(await lookup(t, 'cus_card_notice')).toMatchObject({
      notice: { kind: 'card_expiring' },
      card_update_url: null,
    });
  });
});

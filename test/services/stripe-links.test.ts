import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { stripeLinks, portalLocale } from '../../src/services/stripe-links.js';
import type { StripeTimers } from '../../src/services/stripe-api.js';
import { checkStripeApiKey, parseStripeApiUrl } from '../../src/services/stripe-api.js';
import {
  buildCardSource,
  buildCustomer,
  buildInvoice,
  buildPaymentMethod,
  startStripeStandin,
} from '../helpers/stripe-standin.js';
import type { StripeStandin, StripeStandinData } from '../helpers/stripe-standin.js';

/**
 * Where Dunwall's pay and card links lead, asked of the Stripe stand-in over a real socket:
 * an open invoice's current page, a portal session's card form once it is settled, and each
 * way Stripe fails (an error, 429, down, slower than the bound). The 3 s bound is kept with
 * timers the test fires itself: the stand-in holds its answer, the test passes the time.
 */

const KEY = 'rk_test_linksKey0000000000000000';
const OTHER_SPACE_KEY = 'rk_test_otherSpace00000000000000';
const NOW_S = 1_780_000_000;

/** Timers fired by the test: `pass(ms)` runs what is due, as the clock moving on would. */
function manualTimers() {
  let now = 0;
  const due = new Map<number, { at: number; fn: () => void }>();
  let next = 1;
  const timers: StripeTimers = {
    setTimeout(fn, ms) {
      const id = next++;
      due.set(id, { at: now + ms, fn });
      return id;
    },
    clearTimeout(handle) {
      due.delete(handle as number);
    },
  };
  return {
    timers,
    get pending() {
      return due.size;
    },
    pass(ms: number) {
      now += ms;
      for (const [id, t] of [...due]) {
        if (t.at <= now) {
          due.delete(id);
          t.fn();
        }
      }
    },
  };
}

const warnings: Array<Record<string, unknown>> = [];
const log = { warn: (obj: Record<string, unknown>) => warnings.push(obj) };

let standin: StripeStandin;
const data: StripeStandinData = {
  subscriptions: [],
  invoices: [],
  invoicePayments: [],
  paymentIntents: [],
  charges: [],
  customers: [],
  paymentMethods: [],
};

const pm = buildPaymentMethod({ customer: 'cus_links1', expMonth: 4, expYear: 2027 });
data.paymentMethods?.push(pm);
data.customers?.push(
  buildCustomer({ id: 'cus_links1', defaultPaymentMethod: pm.id as string }),
  buildCustomer({ id: 'cus_links2' }),
  buildCustomer({
    id: 'cus_legacy',
    defaultSource: buildCardSource({ customer: 'cus_legacy', expMonth: 11, expYear: 2026 }),
  }),
);
const openInvoice = buildInvoice({ id: 'in_open1', customer: 'cus_links1', status: 'open', createdS: NOW_S });
const paidInvoice = buildInvoice({ id: 'in_paid1', customer: 'cus_links1', status: 'paid', createdS: NOW_S });
const voidInvoice = buildInvoice({ id: 'in_void1', customer: 'cus_links1', status: 'void', createdS: NOW_S });
const otherInvoice = buildInvoice({ id: 'in_other1', customer: 'cus_links2', status: 'open', createdS: NOW_S });
data.invoices.push(openInvoice, paidInvoice, voidInvoice, otherInvoice);

/** Space 1 holds KEY, space 2 OTHER_SPACE_KEY, space 3 none. */
const keyStore = {
  openStripeApiKey: (spaceId: number) => Promise.resolve(spaceId === 1 ? KEY : spaceId === 2 ? OTHER_SPACE_KEY : null),
};

function links(timers?: StripeTimers) {
  return stripeLinks({
    keys: keyStore,
    apiUrl: standin.url,
    timeoutMs: 3000,
    now: () => 0,
    log,
    ...(timers ? { timers } : {}),
  });
}

beforeAll(async () => {
  standin = await startStripeStandin(data, { keys: { [KEY]: 'all', [OTHER_SPACE_KEY]: 'all' } });
});
afterAll(async () => {
  await standin.close();
});
afterEach(() => {
  standin.release();
  standin.up();
  standin.recover();
  standin.rateLimitNext(0, 0);
  warnings.length = 0;
});

describe('stripeLinks.open', () => {
  it("sends a pay link of an open invoice to the invoice's current hosted page", async () => {
    const before = standin.count('GET', '/v1/invoices/in_open1');
    const r = await links().open({ kind: 'pay', spaceId: 1, customerId: 'cus_links1', invoiceId: 'in_open1' });
    expect(r).toEqual({ ok: true, location: openInvoice.hosted_invoice_url });
    expect(standin.count('GET', '/v1/invoices/in_open1')).toBe(before + 1);
    expect(standin.requests.at(-1)?.key).toBe(KEY);
    expect(standin.count('POST', '/v1/billing_portal/sessions')).toBe(0);
  });

  it('follows the invoice as Stripe has it now: paid since, the same link leads to the card form', async () => {
    const invoice = buildInvoice({ id: 'in_changing', customer: 'cus_links1', status: 'open', createdS: NOW_S });
    data.invoices.push(invoice);
    const first = await links().open({ kind: 'pay', spaceId: 1, customerId: 'cus_links1', invoiceId: 'in_changing' });
    expect(first).toEqual({ ok: true, location: invoice.hosted_invoice_url });
    invoice.status = 'paid';
    const second = await links().open({ kind: 'pay', spaceId: 1, customerId: 'cus_links1', invoiceId: 'in_changing' });
    expect(second.ok && second.location).toMatch(/^https:\/\/billing\.stripe\.com\/p\/session\//);
  });

  it.each([
    ['paid', 'in_paid1'],
    ['void', 'in_void1'],
  ])('sends a pay link of a %s invoice to a portal session for the card', async (_status, invoiceId) => {
    const before = standin.count('POST', '/v1/billing_portal/sessions');
    const r = await links().open({
      kind: 'pay',
      spaceId: 1,
      customerId: 'cus_links1',
      invoiceId,
      locale: 'fr-BE',
      returnUrl: 'https://app.example.com/billing',
    });
    expect(r.ok).toBe(true);
    expect(r.ok && r.location).toMatch(/^https:\/\/billing\.stripe\.com\/p\/session\/test_/);
    expect(standin.count('POST', '/v1/billing_portal/sessions')).toBe(before + 1);
    const form = standin.requests.at(-1)?.form;
    expect(form?.get('customer')).toBe('cus_links1');
    expect(form?.get('flow_data[type]')).toBe('payment_method_update');
    expect(form?.get('return_url')).toBe('https://app.example.com/billing');
    expect(form?.get('locale')).toBe('fr');
  });

  it('opens a card link as a portal session of the card form, form-encoded', async () => {
    const r = await links().open({ kind: 'card', spaceId: 1, customerId: 'cus_links2', invoiceId: null });
    expect(r.ok && r.location).toMatch(/^https:\/\/billing\.stripe\.com\/p\/session\//);
    const last = standin.requests.at(-1);
    expect(last?.method).toBe('POST');
    expect(last?.path).toBe('/v1/billing_portal/sessions');
    expect(last?.form.get('flow_data[type]')).toBe('payment_method_update');
    expect(last?.form.get('locale')).toBe('auto');
    expect(last?.form.has('return_url')).toBe(false);
  });

  it("never leads one customer's link to another customer's invoice", async () => {
    const r = await links().open({ kind: 'pay', spaceId: 1, customerId: 'cus_links1', invoiceId: 'in_other1' });
    expect(r).toEqual({ ok: false, reason: 'not_found' });
  });

  it('answers not_found for an invoice or customer Stripe does not have, no_key without a key', async () => {
    const l = links();
    expect(await l.open({ kind: 'pay', spaceId: 1, customerId: 'cus_links1', invoiceId: 'in_nosuch' })).toEqual({
      ok: false,
      reason: 'not_found',
    });
    expect(await l.open({ kind: 'card', spaceId: 1, customerId: 'cus_nosuch', invoiceId: null })).toEqual({
      ok: false,
      reason: 'not_found',
    });
    const before = standin.requests.length;
    expect(await l.open({ kind: 'card', spaceId: 3, customerId: 'cus_links1', invoiceId: null })).toEqual({
      ok: false,
      reason: 'no_key',
    });
    expect(standin.requests.length).toBe(before);
  });

  it('answers stripe_error when Stripe errs, rate limits (no retry) or is down, and logs no key', async () => {
    const l = links();
    standin.failFrom(1);
    expect(await l.open({ kind: 'pay', spaceId: 1, customerId: 'cus_links1', invoiceId: 'in_open1' })).toEqual({
      ok: false,
      reason: 'stripe_error',
    });
    standin.recover();

    standin.rateLimitNext(1, 1);
    const before = standin.requests.length;
    expect(await l.open({ kind: 'card', spaceId: 1, customerId: 'cus_links1', invoiceId: null })).toEqual({
      ok: false,
      reason: 'stripe_error',
    });
    expect(standin.requests.length - before).toBe(1);
    expect(standin.requests.at(-1)?.status).toBe(429);

    standin.down();
    expect(await l.open({ kind: 'pay', spaceId: 1, customerId: 'cus_links1', invoiceId: 'in_open1' })).toEqual({
      ok: false,
      reason: 'stripe_error',
    });
    expect(warnings.map((w) => w.failure)).toEqual(['answered', 'answered', 'unreachable']);
    expect(JSON.stringify(warnings)).not.toContain(KEY);
  });

  it('gives up at the 3 s bound, with the time passed by the test, and the late answer changes nothing', async () => {
    const clock = manualTimers();
    standin.hold();
    const pending = links(clock.timers).open({
      kind: 'pay',
      spaceId: 1,
      customerId: 'cus_links1',
      invoiceId: 'in_open1',
    });
    await expect.poll(() => standin.held).toBe(1);
    clock.pass(2999);
    let settled = false;
    void pending.then(() => (settled = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    clock.pass(1);
    expect(await pending).toEqual({ ok: false, reason: 'stripe_timeout' });
    expect(clock.pending).toBe(0);
    standin.release();
  });

  it("uses the space's own key", async () => {
    await links().open({ kind: 'card', spaceId: 2, customerId: 'cus_links1', invoiceId: null });
    expect(standin.requests.at(-1)?.key).toBe(OTHER_SPACE_KEY);
  });
});

describe('defaultCardExpiry', () => {
  it("reads the default payment method's card, else the default source, else null", async () => {
    const l = links();
    expect(await l.defaultCardExpiry(1, 'cus_links1')).toEqual({ ok: true, expiry: { month: 4, year: 2027 } });
    expect(standin.requests.at(-1)?.query.getAll('expand[]')).toContain('invoice_settings.default_payment_method');
    expect(await l.defaultCardExpiry(1, 'cus_legacy')).toEqual({ ok: true, expiry: { month: 11, year: 2026 } });
    expect(await l.defaultCardExpiry(1, 'cus_links2')).toEqual({ ok: true, expiry: null });
    expect(await l.defaultCardExpiry(1, 'cus_nosuch')).toEqual({ ok: false, reason: 'not_found' });
    expect(await l.defaultCardExpiry(3, 'cus_links1')).toEqual({ ok: false, reason: 'no_key' });
  });
});

describe('checkStripeApiKey', () => {
  const api = () => ({ apiUrl: standin.url, timeoutMs: 3000 });

  it('passes a secret key and a restricted key with the four permissions', async () => {
    standin.addKey('rk_test_enough00000000000000000', [
      'rak_invoice_read',
      'rak_customer_read',
      'rak_subscription_read',
      'rak_billing_portal_session_write',
    ]);
    expect(await checkStripeApiKey(api(), KEY)).toEqual({ ok: true });
    expect(await checkStripeApiKey(api(), 'rk_test_enough00000000000000000')).toEqual({ ok: true });
  });

  it('names every missing permission', async () => {
    standin.addKey('rk_test_readonly000000000000000', ['rak_invoice_read', 'rak_customer_read']);
    expect(await checkStripeApiKey(api(), 'rk_test_readonly000000000000000')).toEqual({
      ok: false,
      problem: 'permission',
      missing: ['Subscriptions: read', 'Customer portal: write'],
    });
  });

  it('tells an unknown key, an unconfigured portal, Stripe down and Stripe slow apart', async () => {
    expect(await checkStripeApiKey(api(), 'rk_test_unknown0000000000000000')).toEqual({
      ok: false,
      problem: 'invalid',
    });
    standin.portalConfigured(false);
    const portal = await checkStripeApiKey(api(), KEY);
    standin.portalConfigured(true);
    expect(portal).toMatchObject({ ok: false, problem: 'portal' });
    expect(portal.ok === false && portal.problem === 'portal' && portal.message).toContain('customer portal settings');
    standin.down();
    expect(await checkStripeApiKey(api(), KEY)).toEqual({ ok: false, problem: 'unreachable', why: 'unreachable' });
    standin.up();
    const clock = manualTimers();
    standin.hold();
    const pending = checkStripeApiKey({ ...api(), timers: clock.timers }, KEY);
    await expect.poll(() => standin.held).toBe(4);
    clock.pass(3000);
    expect(await pending).toEqual({ ok: false, problem: 'unreachable', why: 'timeout' });
  });
});

describe('helpers', () => {
  it('accepts https, and http only to a loopback address', () => {
    expect(parseStripeApiUrl('https://api.stripe.com/')).toEqual({ ok: true, url: 'https://api.stripe.com' });
    expect(parseStripeApiUrl('http://127.0.0.1:12111')).toEqual({ ok: true, url: 'http://127.0.0.1:12111' });
    expect(parseStripeApiUrl('http://stripe.internal').ok).toBe(false);
    expect(parseStripeApiUrl('https://user:pw@api.stripe.com').ok).toBe(false);
    expect(parseStripeApiUrl('ftp://api.stripe.com').ok).toBe(false);
  });

  it("maps a customer's language to a portal locale", () => {
    expect(portalLocale('pt-BR')).toBe('pt-BR');
    expect(portalLocale('de-AT')).toBe('de');
    expect(portalLocale('xx')).toBe('auto');
    expect(portalLocale(undefined)).toBe('auto');
  });
});

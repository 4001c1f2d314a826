import { createHmac } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readAdminTokenFile } from '../../src/runtime/admin-token.js';
import { loadConfig } from '../../src/runtime/config.js';
import { createLogger } from '../../src/runtime/logger.js';
import { start } from '../../src/runtime/server.js';
import type { Running } from '../../src/runtime/server.js';
import { freePort } from '../helpers/socket.js';
import { event, hostedInvoiceUrl, invoice, paymentIds, signed } from '../helpers/stripe-fixtures.js';
import type { PaymentIds } from '../helpers/stripe-fixtures.js';
import { buildCustomer, buildInvoice, startStripeStandin } from '../helpers/stripe-standin.js';
import type { StripeStandin, StripeStandinData } from '../helpers/stripe-standin.js';

/**
 * The way out of the gate and the banner through Dunwall's own links (docs/links.md), in
 * Chromium, against a running service whose Stripe is the Stripe API stand-in
 * (test/helpers/stripe-standin.ts, DUNWALL_STRIPE_API_URL) and whose public address is its own
 * loopback address (DUNWALL_PUBLIC_URL=http://127.0.0.1:PORT):
 *
 * - the tenant's restricted key is set through the admin API, and the stand-in checks it;
 * - a customer locked out on an invoice whose stored hosted page has expired clicks Pay now,
 *   goes through /pay to the invoice's current hosted page as the stand-in serves it, pays,
 *   Stripe's `invoice.paid` reaches Dunwall, and the gate is gone within 2 s of coming back;
 * - a warned customer's Update card opens /card, which lands on the Customer Portal session the
 *   stand-in made for that customer's card form;
 * - with the stand-in down, Pay now still lands somewhere useful: the stored page while it
 *   has not expired, else the branding's payment link, else the contact page; never a 5xx.
 *
 * Stand-ins besides Stripe's API: Stripe's hosted invoice page is a local server whose page says
 * it is one (the stand-in's invoice names it); pages on Stripe's and the tenant's hosts
 * (`invoice.stripe.com`, `billing.stripe.com`, the payment link), unreachable from here, are
 * answered in the browser by a page saying it is a stand-in, at the address asked for.
 */
const CHROMIUM = '/usr/bin/chromium';
const haveBrowser = existsSync(CHROMIUM);
const STRIPE_SECRET = 'whsec_pay_link_browser_0123456789ab';
const RK = 'rk_live_51PayLinkBrowserStandin0000000000';
const PAYMENT_LINK = 'https://buy.stripe.com/test_acme_payment_link';
const STANDIN_PAGE = "<!doctype html><title>Stand-in</title><p>Stand-in for a page of Stripe's.</p>";
const DAY_S = 86_400;
/** Hosts no test machine reaches: the browser answers them with a page saying it is a stand-in. */
const UNREACHABLE = ['https://invoice.stripe.com/', 'https://billing.stripe.com/', PAYMENT_LINK];

/** An answer of Dunwall to a link opened in the browser. */
interface Opened {
  url: string;
  status: number;
  location: string | null;
}

describe.skipIf(!haveBrowser)(
  'Pay now and Update card through Dunwall links, in Chromium, against the Stripe API stand-in',
  () => {
    let running: Running;
    let publicUrl = '';
    let standin: StripeStandin;
    const data: StripeStandinData = {
      subscriptions: [],
      invoices: [],
      invoicePayments: [],
      paymentIntents: [],
      charges: [],
      customers: [],
    };
    let pageServer: Server | null = null;
    let invoiceServer: Server | null = null;
    let invoiceHost = '';
    const invoicePagesServed: string[] = [];
    let browser: Browser;
    let appHost = '';
    const tags = new Map<string, string>();
    let tenant: { publishable_key: string; hmac_secret: string };
    const dataDir = mkdtempSync(join(tmpdir(), 'dunwall-paylink-'));

    async function admin(method: string, path: string, body?: unknown): Promise<Response> {
      return fetch(`${running.url}/admin/v1${path}`, {
        method,
        headers: {
          authorization: `Bearer ${readAdminTokenFile(dataDir) ?? ''}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    }

    async function stripe(fixture: ReturnType<typeof event>): Promise<void> {
      const { payload, signature } = signed(fixture, STRIPE_SECRET, Math.floor(Date.now() / 1000));
      const res = await fetch(`${running.url}/webhooks/stripe/acme`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'stripe-signature': signature },
        body: payload,
      });
      expect(res.status).toBe(200);
    }

    /** The customer's invoice failed its last (lockout) or a retried (warning) attempt, finalized `finalizedAgoS` ago. */
    async function failed(customer: string, ids: PaymentIds, finalizedAgoS: number, retry: boolean): Promise<number> {
      const createdS = Math.floor(Date.now() / 1000) - 5;
      await stripe(
        event(
          'invoice.payment_failed',
          {
            ...invoice(customer, { ids, next_payment_attempt: retry ? createdS + 3 * DAY_S : null }),
            status_transitions: { finalized_at: createdS - finalizedAgoS },
          },
          { created: createdS },
        ),
      );
      return createdS;
    }

    /** The customer's page of the tenant's app, with the snippet signed for the customer. */
    function appPage(customer: string): string {
      const hmac = createHmac('sha256', tenant.hmac_secret).update(customer).digest('hex');
      tags.set(
        customer,
        `<script src="${running.url}/snippet.js" data-tenant="acme" data-key="${tenant.publishable_key}" data-customer="${customer}" data-hmac="${hmac}" async></script>`,
      );
      return `${appHost}/app/${customer}`;
    }

    /** A browser context where Stripe's and the tenant's unreachable hosts answer a stand-in page. */
    async function newContext(): Promise<{ context: BrowserContext; dunwall: Opened[] }> {
      const context = await browser.newContext({ viewport: { width: 1000, height: 700 } });
      for (const host of UNREACHABLE)
        await context.route(`${host}**`, (route) =>
          route.fulfill({ status: 200, contentType: 'text/html; charset=utf-8', body: STANDIN_PAGE }),
        );
      // Dunwall's links are passed through as the service answers them, and recorded. Chromium
      // applies no route to a redirect's next hop, so a redirect to one of the hosts above is
      // followed as a navigation of its own, to the same address.
      const dunwall: Opened[] = [];
      for (const kind of ['pay', 'card'])
        await context.route(`${publicUrl}/${kind}/**`, async (route) => {
          const answer = await route.fetch({ maxRedirects: 0 });
          const location = answer.headers().location ?? null;
          dunwall.push({ url: route.request().url(), status: answer.status(), location });
          if (location !== null && UNREACHABLE.some((host) => location.startsWith(host)))
            await route.fulfill({
              status: 200,
              contentType: 'text/html; charset=utf-8',
              body: `<!doctype html><script>location.replace(${JSON.stringify(location)})</script>`,
            });
          else await route.fulfill({ response: answer });
        });
      return { context, dunwall };
    }

    /** Follows a link of the snippet: in the tab it opens, or in the same one. */
    async function follow(context: BrowserContext, page: Page, link: Locator): Promise<Page> {
      if ((await link.getAttribute('target')) === '_blank') {
        const [opened] = await Promise.all([context.waitForEvent('page'), link.click()]);
        await opened.waitForLoadState();
        return opened;
      }
      await Promise.all([page.waitForNavigation(), link.click()]);
      return page;
    }

    beforeAll(async () => {
      standin = await startStripeStandin(data, {
        keys: {
          [RK]: ['rak_invoice_read', 'rak_customer_read', 'rak_subscription_read', 'rak_billing_portal_session_write'],
        },
      });
      const port = await freePort();
      publicUrl = `http://127.0.0.1:${port}`;
      running = await start(
        loadConfig({
          DUNWALL_DATA_DIR: dataDir,
          PORT: String(port),
          HOST: '127.0.0.1',
          DUNWALL_DEMO: '0',
          DUNWALL_PUBLIC_URL: publicUrl,
          DUNWALL_STRIPE_API_URL: standin.url,
        }),
        createLogger('silent'),
      );
      const pages = createServer((req, res) => {
        invoicePagesServed.push(`${invoiceHost}${req.url ?? ''}`);
        res
          .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
          .end("<!doctype html><title>Invoice</title><p>Stand-in for Stripe's hosted invoice page.</p>");
      });
      invoiceServer = pages;
      await new Promise<void>((resolve) => pages.listen(0, '127.0.0.1', resolve));
      invoiceHost = `http://127.0.0.1:${(pages.address() as AddressInfo).port}`;
      const app = createServer((req, res) => {
        const customer = (req.url ?? '').split('/').at(-1) ?? '';
        res
          .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
          .end(`<!doctype html><html><body><h1>Acme app</h1>${tags.get(customer) ?? ''}</body></html>`);
      });
      pageServer = app;
      await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
      appHost = `http://localhost:${(app.address() as AddressInfo).port}`;
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
      });

      tenant = (await (await admin('POST', '/tenants', { slug: 'acme' })).json()) as typeof tenant;
      expect((await admin('PATCH', '/tenants/acme', { stripe_webhook_secret: STRIPE_SECRET })).status).toBe(200);
      // The key is set as an operator sets it; the stand-in is asked with it before it is kept.
      const set = await admin('PUT', '/tenants/acme/stripe-api-key', { key: RK });
      expect(set.status).toBe(200);
      expect(await set.json()).toMatchObject({
        mode: 'live',
        stripe_api_key: { prefix: expect.stringMatching(/^rk_live_/) },
      });
      expect(
        standin.requests
          .filter((r) => r.key === RK)
          .map((r) => `${r.method} ${r.path}`)
          .sort(),
      ).toEqual(['GET /v1/customers', 'GET /v1/invoices', 'GET /v1/subscriptions', 'POST /v1/billing_portal/sessions']);
    }, 60_000);

    afterAll(async () => {
      await browser?.close();
      await new Promise<void>((resolve) => (pageServer ? pageServer.close(() => resolve()) : resolve()));
      await new Promise<void>((resolve) => (invoiceServer ? invoiceServer.close(() => resolve()) : resolve()));
      await running?.close();
      await standin?.close();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it('goes from the gate through /pay to the invoice page Stripe serves now, and the gate is gone once paid', async () => {
      // Stripe gives up on an invoice finalized 40 days ago: its stored hosted page has expired.
      const customer = 'cus_paylink1';
      const ids = paymentIds();
      const fresh = `${invoiceHost}/i/acct_1TestAccount0000/fresh_${ids.invoice}`;
      data.customers?.push(buildCustomer({ id: customer }));
      data.invoices.push({
        ...buildInvoice({ id: ids.invoice, customer, createdS: Math.floor(Date.now() / 1000) - 41 * DAY_S }),
        hosted_invoice_url: fresh,
      });
      const createdS = await failed(customer, ids, 40 * DAY_S, false);

      const { context, dunwall } = await newContext();
      const page = await context.newPage();
      await page.goto(appPage(customer));
      const dialog = page.locator('dunwall-enforcement [role="dialog"]');
      await expect.poll(() => dialog.isVisible(), { timeout: 10_000 }).toBe(true);
      const pay = dialog.locator('a', { hasText: 'Pay now' });
      expect(await pay.getAttribute('href')).toMatch(new RegExp(`^${publicUrl}/pay/[0-9A-Za-z]{32}$`));

      const invoicePage = await follow(context, page, pay);
      expect(invoicePage.url()).toBe(fresh);
      expect(dunwall).toEqual([{ url: await pay.getAttribute('href'), status: 303, location: fresh }]);
      expect(invoicePagesServed).toEqual([fresh]);
      // Dunwall asked the stand-in for that invoice, with the tenant's key.
      expect(standin.requests.filter((r) => r.path === `/v1/invoices/${ids.invoice}`)).toMatchObject([
        { method: 'GET', key: RK, status: 200 },
      ]);

      await stripe(event('invoice.paid', invoice(customer, { ids, status: 'paid' }), { created: createdS + 4 }));
      await invoicePage.close();
      await page.bringToFront();
      const back = Date.now();
      await page.evaluate(() => window.dispatchEvent(new Event('focus')));
      await dialog.waitFor({ state: 'detached', timeout: 2_000 });
      const goneMs = Date.now() - back;
      process.stdout.write(`gate gone ${goneMs} ms after the customer came back\n`);
      expect(goneMs).toBeLessThanOrEqual(2_000);
      await context.close();
    });

    it("opens a warned customer's Update card on the portal session the stand-in made for that customer's card", async () => {
      const customer = 'cus_cardlink1';
      const other = 'cus_cardlink2';
      data.customers?.push(buildCustomer({ id: customer }), buildCustomer({ id: other }));
      await failed(customer, paymentIds(), DAY_S, true);
      await failed(other, paymentIds(), DAY_S, true);

      const { context, dunwall } = await newContext();
      const page = await context.newPage();
      await page.goto(appPage(customer));
      const update = page.locator('dunwall-enforcement a', { hasText: 'Update card' });
      await expect.poll(() => update.isVisible(), { timeout: 10_000 }).toBe(true);
      const href = (await update.getAttribute('href')) ?? '';
      expect(href).toMatch(new RegExp(`^${publicUrl}/card/[0-9A-Za-z]{32}$`));

      const portalsBefore = standin.requests.filter((r) => r.path === '/v1/billing_portal/sessions').length;
      const portal = await follow(context, page, update);
      expect(portal.url()).toMatch(/^https:\/\/billing\.stripe\.com\/p\/session\/test_[0-9A-Za-z]{40}$/);
      expect(dunwall).toEqual([{ url: href, status: 303, location: portal.url() }]);
      const sessions = standin.requests.filter((r) => r.path === '/v1/billing_portal/sessions').slice(portalsBefore);
      expect(sessions).toHaveLength(1);
      const asked = sessions[0];
      expect(asked?.status).toBe(200);
      expect(asked?.key).toBe(RK);
      expect(asked?.form.get('customer')).toBe(customer);
      expect(asked?.form.get('flow_data[type]')).toBe('payment_method_update');
      await context.close();
    });

    it('sends the customer somewhere useful with Stripe down: the stored page, else the payment link, else the contact page', async () => {
      standin.down();
      try {
        // Finalized a day ago: the stored page still works.
        const fresh = 'cus_down_fresh';
        const freshIds = paymentIds();
        await failed(fresh, freshIds, DAY_S, false);
        // Finalized 40 days ago: the stored page has expired.
        const stale = 'cus_down_stale';
        await failed(stale, paymentIds(), 40 * DAY_S, false);

        const { context, dunwall } = await newContext();
        const page = await context.newPage();
        const payNow = async (customer: string): Promise<Page> => {
          await page.goto(appPage(customer));
          const pay = page.locator('dunwall-enforcement [role="dialog"] a', { hasText: 'Pay now' });
          await expect.poll(() => pay.isVisible(), { timeout: 10_000 }).toBe(true);
          expect(await pay.getAttribute('href')).toMatch(new RegExp(`^${publicUrl}/pay/`));
          return follow(context, page, pay);
        };

        const stored = await payNow(fresh);
        expect(stored.url()).toBe(hostedInvoiceUrl(freshIds.invoice));
        if (stored !== page) await stored.close();

        const contact = await payNow(stale);
        expect(contact.url()).toMatch(new RegExp(`^${publicUrl}/pay/`));
        expect(await contact.locator('h1').textContent()).toBeTruthy();
        expect(await contact.locator('p').first().textContent()).toContain('contact');
        if (contact !== page) await contact.close();

        const branded = await admin('PATCH', '/tenants/acme', { branding: { payment_url: PAYMENT_LINK } });
        expect(branded.status).toBe(200);
        const paymentLink = await payNow(stale);
        expect(paymentLink.url()).toBe(PAYMENT_LINK);

        expect(dunwall.map((d) => [d.status, d.location])).toEqual([
          [303, hostedInvoiceUrl(freshIds.invoice)],
          [200, null],
          [303, PAYMENT_LINK],
        ]);
        expect(dunwall.every((d) => d.status < 500)).toBe(true);
        await context.close();
      } finally {
        standin.up();
      }
    });
  },
);

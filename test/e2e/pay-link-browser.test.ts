import { createHmac } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readAdminTokenFile } from '../../src/runtime/admin-token.js';
import { loadConfig } from '../../src/runtime/config.js';
import { createLogger } from '../../src/runtime/logger.js';
import { start } from '../../src/runtime/server.js';
import type { Running } from '../../src/runtime/server.js';
import type { LinkRedirect, LinkTarget, StripeLinks } from '../../src/services/stripe-links.js';
import { event, invoice, paymentIds, signed } from '../helpers/stripe-fixtures.js';

/**
 * A customer locked out on an invoice whose stored hosted page has expired leaves the gate by
 * paying through Dunwall's own link (docs/links.md), in Chromium: Pay now opens
 * `{DUNWALL_PUBLIC_URL}/pay/{token}`, the running service answers 303 to the invoice's fresh
 * page, the customer pays there, Stripe's `invoice.paid` reaches Dunwall, and the gate is gone
 * within 2 s of the customer coming back.
 *
 * Stand-ins: Stripe's client behind the links answers the invoice's fresh page (a fake at the
 * StripeLinks interface); Stripe's hosted page, unreachable from here, is a local server whose
 * page says it is one; the public address `https://dunwall.test` reaches the running service through the
 * browser's routing (the snippet shows https links only). Everything else is real.
 */
const CHROMIUM = '/usr/bin/chromium';
const haveBrowser = existsSync(CHROMIUM);
const PUBLIC_URL = 'https://dunwall.test';
const STRIPE_SECRET = 'whsec_pay_link_browser_0123456789ab';
/** Where the stand-in for Stripe's hosted invoice pages listens (set once it does). */
let invoiceHost = '';
const freshPage = (invoiceId: string) => `${invoiceHost}/i/acct_1TestAccount0000/fresh_${invoiceId}`;

class FreshPages implements StripeLinks {
  readonly opened: LinkTarget[] = [];
  open(target: LinkTarget): Promise<LinkRedirect> {
    this.opened.push(target);
    return Promise.resolve({ ok: true, location: freshPage(target.invoiceId ?? '') });
  }
}

describe.skipIf(!haveBrowser)('Pay now through a Dunwall link, in Chromium', () => {
  let running: Running;
  let pageServer: Server | null = null;
  let invoiceServer: Server | null = null;
  const invoicePages: string[] = [];
  let browser: Browser;
  const stripeLinks = new FreshPages();
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

  beforeAll(async () => {
    running = await start(
      loadConfig({ DUNWALL_DATA_DIR: dataDir, PORT: '0', DUNWALL_DEMO: '0', DUNWALL_PUBLIC_URL: PUBLIC_URL }),
      createLogger('silent'),
      { stripeLinks },
    );
    const standIn = createServer((req, res) => {
      invoicePages.push(`${invoiceHost}${req.url ?? ''}`);
      res
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end("<!doctype html><title>Invoice</title><p>Stand-in for Stripe's hosted invoice page.</p>");
    });
    invoiceServer = standIn;
    await new Promise<void>((resolve) => standIn.listen(0, '127.0.0.1', resolve));
    invoiceHost = `http://127.0.0.1:${(standIn.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await new Promise<void>((resolve) => (pageServer ? pageServer.close(() => resolve()) : resolve()));
    await new Promise<void>((resolve) => (invoiceServer ? invoiceServer.close(() => resolve()) : resolve()));
    await running?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('goes from the gate through /pay to the fresh invoice page, and the gate is gone once paid', async () => {
    const created = (await (await admin('POST', '/tenants', { slug: 'acme' })).json()) as {
      publishable_key: string;
      hmac_secret: string;
    };
    expect((await admin('PATCH', '/tenants/acme', { stripe_webhook_secret: STRIPE_SECRET })).status).toBe(200);
    // The tenant's live mode has a Stripe API key, as setting one tells the links.
    const space = await running.store.tenants.getTenant('acme');
    if (space === null) throw new Error('tenant');
    await running.store.stripeApiKeys.setStripeApiKey(
      space.id,
      'rk_live_000000000000000000000000',
      'rk_live_0000',
      new Date(),
      { kind: 'operator' },
    );

    // Stripe gives up on an invoice finalized 40 days ago: its stored hosted page has expired.
    const customer = 'cus_paylink1';
    const ids = paymentIds();
    const createdS = Math.floor(Date.now() / 1000) - 5;
    await stripe(
      event(
        'invoice.payment_failed',
        {
          ...invoice(customer, { ids, next_payment_attempt: null }),
          status_transitions: { finalized_at: createdS - 40 * 86_400 },
        },
        { created: createdS },
      ),
    );

    const hmac = createHmac('sha256', created.hmac_secret).update(customer).digest('hex');
    const tag = `<script src="${running.url}/snippet.js" data-tenant="acme" data-key="${created.publishable_key}" data-customer="${customer}" data-hmac="${hmac}" async></script>`;
    const server = createServer((_req, res) => {
      res
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end(`<!doctype html><html><body><h1>Acme app</h1>${tag}</body></html>`);
    });
    pageServer = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const appUrl = `http://localhost:${(server.address() as AddressInfo).port}/app`;

    const context = await browser.newContext({ viewport: { width: 1000, height: 700 } });
    // The public address reaches the running service; its answers come back as they are.
    const seenAtDunwall: { status: number; location: string | undefined }[] = [];
    await context.route(`${PUBLIC_URL}/**`, async (route) => {
      const url = route.request().url().replace(PUBLIC_URL, running.url);
      const answer = await route.fetch({ url, maxRedirects: 0 });
      seenAtDunwall.push({ status: answer.status(), location: answer.headers().location });
      const location = answer.headers().location;
      await route.fulfill({ status: answer.status(), headers: location === undefined ? {} : { location } });
    });
    const page = await context.newPage();
    await page.goto(appUrl);
    const dialog = page.locator('dunwall-enforcement [role="dialog"]');
    await expect.poll(() => dialog.isVisible(), { timeout: 10_000 }).toBe(true);
    const pay = dialog.locator('a', { hasText: 'Pay now' });
    const href = (await pay.getAttribute('href')) ?? '';
    expect(href).toMatch(/^https:\/\/dunwall\.test\/pay\/[0-9A-Za-z]{32}$/);

    const [invoicePage] = await Promise.all([context.waitForEvent('page'), pay.click()]);
    await invoicePage.waitForLoadState();
    expect(invoicePage.url()).toBe(freshPage(ids.invoice));
    expect(seenAtDunwall).toEqual([{ status: 303, location: freshPage(ids.invoice) }]);
    expect(invoicePages).toEqual([freshPage(ids.invoice)]);
    expect(stripeLinks.opened).toMatchObject([{ kind: 'pay', customerId: customer, invoiceId: ids.invoice }]);

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
});

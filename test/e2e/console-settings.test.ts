import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, FrameLocator, Page } from 'playwright-core';
import {
  axeViolations,
  consolePage,
  haveBrowser,
  launchChromium,
  PHONE,
  seedTenant,
  shot,
  signIn,
  startConsoleService,
} from '../helpers/console-browser.js';
import type { ConsoleService } from '../helpers/console-browser.js';
import { Receiver } from '../helpers/receiver.js';
import { snippetTag } from '../helpers/snippet-browser.js';
import type { Tenant } from '../helpers/snippet-browser.js';
import { event, invoice, signed } from '../helpers/stripe-fixtures.js';

/**
 * The console's settings in Chromium: branding saved through the form, its preview (the
 * snippet itself, in a frame) showing what the snippet shows a real customer, the policy
 * with what it would change on a known state, a key created and shown once, scope hiding
 * (the Stripe signing secret needs stripe:write, never settings:write alone), the signing
 * secret's changes named on the health page, and a webhook endpoint created, its failed message retried through the page until the
 * receiver has it.
 */

const DAY_S = 86_400;
const ALL = [
  'status:read',
  'subscribers:read',
  'subscribers:write',
  'settings:write',
  'webhooks:write',
  'keys:write',
  'stripe:write',
];

/** The banner's sentence and accent, the gate's title and accent, as the snippet drew them. */
async function drawn(
  root: Page | FrameLocator,
  state: 'warning' | 'lockout',
): Promise<{ text: string; accent: string }> {
  if (state === 'warning') {
    const bar = root.locator('dunwall-enforcement .bar');
    await bar.waitFor({ timeout: 10_000 });
    // The sentence, without the countdown the preview's lockout three days ahead adds after it.
    const text = await bar
      .locator('p')
      .first()
      .evaluate((p) => p.firstChild?.textContent?.trim() ?? '');
    return { text, accent: await bar.evaluate((e) => getComputedStyle(e).borderBottomColor) };
  }
  const box = root.locator('dunwall-enforcement .box');
  await box.waitFor({ timeout: 10_000 });
  return {
    text: await box.locator('#dw-title').innerText(),
    accent: await box.evaluate((e) => getComputedStyle(e).borderTopColor),
  };
}

describe.skipIf(!haveBrowser)('the console: settings', () => {
  let service: ConsoleService;
  let browser: Browser;
  let receiver: Receiver;
  let tenant: Tenant;
  let fullKey = '';
  let readKey = '';
  let locked = '';
  let warned = '';
  let pages: Server;
  let pagesUrl = '';

  async function noSeriousViolation(page: Page): Promise<void> {
    expect(JSON.stringify(await axeViolations(page), null, 1)).toBe('[]');
  }

  beforeAll(async () => {
    [service, browser, receiver] = await Promise.all([
      startConsoleService({
        DUNWALL_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true',
        DUNWALL_WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
      }),
      launchChromium(),
      // The tenant's backend: failing at first (the message waits for its retry, half a minute away), then fine.
      Receiver.start((n) => (n === 0 ? 500 : 200)),
    ]);
    const made = await seedTenant(service, 'acme', { recovered: 2, open: 3 }, { tier: 'scale' });
    tenant = made.tenant;
    locked = made.locked;
    warned = made.open[0] as string;
    // A warning three days old: an escalation after two days would gate it.
    const now = Math.floor(Date.now() / 1000);
    await service.admin('POST', '/tenants/acme/stripe-events', {
      events: [
        event('invoice.payment_failed', invoice('cus_old_warning', { next_payment_attempt: now + DAY_S }), {
          created: now - 3 * DAY_S,
        }),
      ],
    });
    fullKey = await service.key('acme', ALL);
    readKey = await service.key('acme', ['subscribers:read']);
    // A plain page of the tenant's app with the snippet, for a customer given in the address.
    pages = createServer((req, res) => {
      const customer = new URL(req.url ?? '/', 'http://x').searchParams.get('customer') ?? '';
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(
          `<!doctype html><html><body><h1>App</h1>${snippetTag(`${service.url}/snippet.js`, tenant, customer)}</body></html>`,
        );
    });
    await new Promise<void>((resolve) => pages.listen(0, '127.0.0.1', resolve));
    pagesUrl = `http://127.0.0.1:${(pages.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await browser?.close();
    await service?.close();
    await receiver?.close();
    await new Promise((resolve) => pages?.close(resolve));
  });

  it('saves the branding through the form, and previews it as the snippet shows it to a real customer', async () => {
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, fullKey);
      await page.getByRole('link', { name: 'Settings' }).click();
      await page.getByRole('heading', { name: 'Branding' }).waitFor();
      await page.getByRole('textbox', { name: 'Accent' }).fill('#0b7a3e');
      await page.getByRole('textbox', { name: 'Banner text' }).fill('Your card was declined');
      await page.getByRole('textbox', { name: 'Gate title' }).fill('Pay to keep using Acme');
      // The preview follows the draft before it is saved.
      const banner = page.frameLocator('iframe[title="Preview of the banner (warning)"]');
      const gate = page.frameLocator('iframe[title="Preview of the gate (lockout)"]');
      await expect.poll(async () => (await drawn(banner, 'warning')).text).toBe('Your card was declined');
      await expect.poll(async () => (await drawn(gate, 'lockout')).text).toBe('Pay to keep using Acme');
      // Typed while the gate is drawn again (each pause is longer than the preview's delay):
      // the gate takes the focus on a customer's page, never from the field typed in here.
      const gateTitle = page.getByRole('textbox', { name: 'Gate title' });
      await gateTitle.pressSequentially(' now', { delay: 700 });
      expect(await gateTitle.inputValue()).toBe('Pay to keep using Acme now');
      expect(await gateTitle.evaluate((e) => document.activeElement === e)).toBe(true);
      await expect.poll(async () => (await drawn(gate, 'lockout')).text).toBe('Pay to keep using Acme now');
      await gateTitle.fill('Pay to keep using Acme');
      await expect.poll(async () => (await drawn(gate, 'lockout')).text).toBe('Pay to keep using Acme');
      await page.getByRole('button', { name: 'Save branding' }).click();
      await page.getByRole('status').filter({ hasText: 'Branding saved.' }).waitFor();
      const served = (await (await fetch(`${service.url}/api/branding/acme`)).json()) as Record<string, unknown>;
      expect(served).toEqual({
        colors: { accent: '#0b7a3e' },
        texts: { default: { banner_body: 'Your card was declined', gate_title: 'Pay to keep using Acme' } },
      });

      // The real snippet on a page of the tenant's app, for a customer in warning and one locked out.
      const app = await browser.newContext();
      try {
        const real = await app.newPage();
        await real.goto(`${pagesUrl}/?customer=${warned}`);
        const realBanner = await drawn(real, 'warning');
        await real.goto(`${pagesUrl}/?customer=${locked}`);
        const realGate = await drawn(real, 'lockout');
        expect(realBanner).toEqual({ text: 'Your card was declined', accent: 'rgb(11, 122, 62)' });
        expect(realGate).toEqual({ text: 'Pay to keep using Acme', accent: 'rgb(11, 122, 62)' });
        await expect.poll(() => drawn(banner, 'warning')).toEqual(realBanner);
        await expect.poll(() => drawn(gate, 'lockout')).toEqual(realGate);
      } finally {
        await app.close();
      }
      // As a member reads it: the member's sentences, and no link in the banner or the gate
      // (which a billing admin reads with the draft's payment link).
      await page.getByRole('textbox', { name: /Payment link/ }).fill('https://billing.acme.test/pay');
      await expect.poll(() => banner.locator('dunwall-enforcement .bar a').count()).toBe(1);
      await expect.poll(() => gate.locator('dunwall-enforcement .box a').count()).toBe(1);
      await page.getByRole('textbox', { name: "A member's gate sentence" }).fill('Ask Dana to update the card.');
      await page.getByRole('checkbox', { name: /As a member reads it/ }).check();
      await expect
        .poll(async () => (await drawn(banner, 'warning')).text)
        .toBe("Ask your account's billing admin to update the payment method.");
      await expect
        .poll(() => gate.locator('dunwall-enforcement .box #dw-text').innerText())
        .toBe('Ask Dana to update the card.');
      expect(await banner.locator('dunwall-enforcement .bar a').count()).toBe(0);
      expect(await gate.locator('dunwall-enforcement .box a').count()).toBe(0);
      await page.getByRole('checkbox', { name: /As a member reads it/ }).uncheck();
      await expect.poll(async () => (await drawn(banner, 'warning')).text).toBe('Your card was declined');
      await shot(page, 'settings');
      await noSeriousViolation(page);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('says what a policy would change now, before it is saved, and saves it', async () => {
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, fullKey);
      await page.goto(`${service.url}/console/t/acme/settings`);
      await page.getByRole('heading', { name: 'Dunning policy' }).waitFor();
      const impact = page.locator('.impact');
      await expect.poll(() => impact.innerText()).toContain('This would gate no one new and let no one in.');
      // Ten days of grace: the customer locked out five days ago is let in.
      await page.getByRole('spinbutton', { name: /Grace days/ }).fill('10');
      await expect.poll(() => impact.innerText()).toContain('1 customer would be let in.');
      await page.getByRole('spinbutton', { name: /Grace days/ }).fill('0');
      // Escalation after two days: the warning of three days ago is gated.
      await page.getByRole('spinbutton', { name: /Escalate/ }).fill('2');
      await expect.poll(() => impact.innerText()).toContain('1 customer would be gated now.');
      expect(await impact.innerText()).toMatch(
        /Now: 1 customer gated, 4 customers warned\. With this policy: 2 customers gated, 3 customers warned\./,
      );
      // The card-expiring notice: a checkbox, off by default.
      const notice = page.getByRole('checkbox', { name: /Card expiring/ });
      expect(await notice.isChecked()).toBe(false);
      await notice.check();
      await page.getByRole('button', { name: 'Save policy' }).click();
      await page.getByRole('status').filter({ hasText: 'Policy saved.' }).waitFor();
      const settings = (await (
        await fetch(`${service.url}/v1/settings`, { headers: { authorization: `Bearer ${fullKey}` } })
      ).json()) as { policy: unknown };
      expect(settings.policy).toEqual({
        enforcement: 'gate',
        grace_days: 0,
        escalate_after_days: 2,
        notices: ['card_expiring'],
      });
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('creates a key shown once, which then works with its bearer', async () => {
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, fullKey);
      await page.goto(`${service.url}/console/t/acme/settings`);
      await page.getByRole('heading', { name: 'Secret keys' }).waitFor();
      await page.getByRole('heading', { name: 'Branding' }).waitFor();
      await page.getByRole('textbox', { name: 'Name (what it is for)' }).fill('billing backend');
      await page.getByRole('checkbox', { name: /settings:write/ }).check();
      await page.getByRole('button', { name: 'Create key' }).click();
      const secret = (await page.locator('.secret-value').innerText()).trim();
      // The console addresses the live mode unless switched: a live key.
      expect(secret).toMatch(/^sk_live_[A-Za-z0-9]{40}$/);
      const res = await fetch(`${service.url}/v1/settings`, { headers: { authorization: `Bearer ${secret}` } });
      expect(res.status).toBe(200);
      await page.getByRole('button', { name: 'I have kept it' }).click();
      await page.getByRole('row', { name: /billing backend/ }).waitFor();
      expect(await page.locator('body').innerText()).not.toContain(secret);
      await noSeriousViolation(page);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('shows a subscribers:read key no branding, policy or key to change, and says which scope each needs', async () => {
    const { page, problems, close } = await consolePage(browser, PHONE);
    try {
      await signIn(page, service.url, readKey);
      await page.goto(`${service.url}/console/t/acme/settings`);
      await page.getByRole('heading', { name: 'Webhook endpoints' }).waitFor();
      await page.getByText('This needs the settings:write scope').waitFor();
      await page.getByText('This needs the keys:write scope').waitFor();
      await page.getByText('This needs the webhooks:write scope').waitFor();
      for (const name of [
        'Save branding',
        'Save policy',
        'Save integration settings',
        'Set signing secret',
        'Create key',
        'Add endpoint',
      ]) {
        expect(await page.getByRole('button', { name }).count(), name).toBe(0);
      }
      // The Stripe signing secret (write-only: nothing to read) is there, disabled, with the reason.
      const secret = page.getByLabel('Stripe signing secret', { exact: true });
      expect(await secret.isDisabled()).toBe(true);
      const reason = await secret.evaluate((e) =>
        (e.getAttribute('aria-describedby') ?? '')
          .split(' ')
          .map((id) => document.getElementById(id)?.textContent ?? '')
          .join(' '),
      );
      expect(reason).toContain(
        'Setting the Stripe signing secret needs the stripe:write scope, which the key this session was opened with does not hold.',
      );
      // Nothing wider than the phone: tables scroll inside their regions.
      expect(
        await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth),
      ).toBeLessThanOrEqual(0);
      await shot(page, 'settings');
      await noSeriousViolation(page);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('shows a settings:write key without stripe:write the signing secret disabled, with the scope it needs, beside the settings it may change', async () => {
    const settingsKey = await service.key('acme', ['settings:write']);
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, settingsKey);
      await page.goto(`${service.url}/console/t/acme/settings`);
      await page.getByRole('heading', { name: 'Integration' }).waitFor();
      // The settings it holds the scope for are there to change.
      expect(await page.getByRole('textbox', { name: 'Card update URL' }).isDisabled()).toBe(false);
      await page.getByRole('button', { name: 'Save integration settings' }).waitFor();
      // The signing secret decides statuses: disabled, no button, and the reason names stripe:write.
      const secret = page.getByLabel(/Stripe signing secret/);
      expect(await secret.isDisabled()).toBe(true);
      expect(await page.getByRole('button', { name: /signing secret/ }).count()).toBe(0);
      const reason = await secret.evaluate((e) =>
        (e.getAttribute('aria-describedby') ?? '')
          .split(' ')
          .map((id) => document.getElementById(id)?.textContent ?? '')
          .join(' '),
      );
      expect(reason).toContain(
        'needs the stripe:write scope, which the key this session was opened with does not hold',
      );
      expect(reason).toContain('settings:write does not reach it');
      await noSeriousViolation(page);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('creates a webhook endpoint, and retries its failed message through the page until the receiver has it', async () => {
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, fullKey);
      await page.goto(`${service.url}/console/t/acme/settings`);
      await page.getByRole('heading', { name: 'Webhook endpoints' }).waitFor();
      await page.getByRole('textbox', { name: 'URL (https)' }).fill(receiver.url());
      await page.getByRole('button', { name: 'Add endpoint' }).click();
      expect(await page.locator('.secret-value').innerText()).toMatch(/^whsec_/);
      await page.getByRole('button', { name: 'I have kept it' }).click();
      // A status change raises a message; the receiver answers 500: it waits for its retry.
      const set = await fetch(`${service.url}/v1/subscribers/${warned}/override`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${fullKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ status: 'active' }),
      });
      expect(set.status).toBe(200);
      await expect.poll(() => receiver.received.length, { timeout: 10_000 }).toBe(1);
      const endpoint = page.getByRole('article', { name: receiver.url() });
      await endpoint.getByRole('button', { name: 'Deliveries' }).click();
      const undelivered = endpoint.getByRole('region', { name: /Messages not delivered/ });
      await undelivered.getByText('HTTP 500').waitFor();
      expect(await undelivered.innerText()).toContain('retrying');
      await endpoint
        .getByRole('region', { name: /Latest attempts/ })
        .getByText('HTTP 500')
        .waitFor();
      await undelivered.getByRole('button', { name: /^Retry now/ }).click();
      await page.getByRole('status').filter({ hasText: 'queued again' }).waitFor();
      await expect.poll(() => receiver.received.length, { timeout: 10_000 }).toBe(2);
      // The same message, sent again at once: its own retry was not due for another 20 s or more.
      const [first, second] = receiver.received;
      expect(second?.headers['webhook-id']).toBe(first?.headers['webhook-id']);
      expect((second?.at ?? 0) - (first?.at ?? 0)).toBeLessThan(20_000);
      await endpoint.getByRole('button', { name: 'Hide deliveries' }).click();
      await endpoint.getByRole('button', { name: 'Deliveries' }).click();
      await endpoint.getByText('None: every message was delivered.').waitFor();
      await shot(page, 'settings-webhooks');
      await noSeriousViolation(page);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('changes every setting of the tenant object through the page, each read back through the API, each refusal shown at its field', async () => {
    // A tenant of its own: the origins and the hmac requirement set here would refuse the snippet's pages of the tests above.
    await service.admin('POST', '/tenants', { slug: 'initech', livemode: false });
    const key = await service.key('initech', ALL);
    const settings = async () => {
      const res = await fetch(`${service.url}/v1/settings`, {
        headers: { authorization: `Bearer ${key}` },
        signal: AbortSignal.timeout(10_000),
      });
      expect(res.status).toBe(200);
      return (await res.json()) as Record<string, unknown>;
    };
    /** Stripe's delivery on a socket, signed with `secret`: its status. */
    const stripe = async (secret: string) => {
      const now = Math.floor(Date.now() / 1000);
      const { payload, signature } = signed(
        event('invoice.payment_failed', invoice('cus_initech_0', { next_payment_attempt: now + DAY_S }), {
          created: now,
        }),
        secret,
        now,
      );
      const res = await fetch(`${service.url}/webhooks/stripe/initech`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'stripe-signature': signature },
        body: payload,
        signal: AbortSignal.timeout(10_000),
      });
      await res.arrayBuffer();
      return res.status;
    };
    /** The texts that describe a field (aria-describedby), as a screen reader reads them with it. */
    const description = (field: ReturnType<Page['locator']>) =>
      field.evaluate((e) =>
        (e.getAttribute('aria-describedby') ?? '')
          .split(' ')
          .map((id) => document.getElementById(id)?.textContent ?? '')
          .join(' '),
      );
    const secret = 'whsec_console_integration_0123456789abcdef';
    expect(await settings()).toMatchObject({
      card_update_url: null,
      hmac_required: false,
      allowed_origins: null,
      stripe_webhook_secret_set: false,
    });
    expect(await stripe(secret)).toBe(400);

    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, key);
      await page.goto(`${service.url}/console/t/initech/settings`);
      await page.getByRole('heading', { name: 'Integration' }).waitFor();
      await page.getByText('No signing secret is set').waitFor();
      const cardUrl = page.getByRole('textbox', { name: 'Card update URL' });
      const hmac = page.getByRole('checkbox', { name: 'Require the hmac on every lookup' });
      const origins = page.getByRole('textbox', { name: 'Allowed origins' });
      const stripeSecret = page.getByLabel('Stripe signing secret', { exact: true });
      const save = page.getByRole('button', { name: 'Save integration settings' });

      // Refused by the service, each at its field: the field marked, described by the problem's detail, and focused.
      await cardUrl.fill('http://pay.example.com/card');
      await save.click();
      const cardError = page.locator('#card_update_url-error');
      await cardError.waitFor();
      expect(await cardError.innerText()).toBe('card_update_url: must be an https URL invalid_request');
      expect(await cardUrl.getAttribute('aria-invalid')).toBe('true');
      expect(await description(cardUrl)).toContain('card_update_url: must be an https URL');
      expect(await cardUrl.evaluate((e) => document.activeElement === e)).toBe(true);
      await cardUrl.fill('https://pay.example.com/card');
      await origins.fill('https://app.example.com\nhttps://app.example.com/billing');
      await save.click();
      const originsError = page.locator('#allowed_origins-error');
      await originsError.waitFor();
      expect(await originsError.innerText()).toContain(
        'Line 2: allowed_origins[1]: must be an origin exactly as a browser sends it (https://app.example.com)',
      );
      expect(await origins.getAttribute('aria-invalid')).toBe('true');
      expect(await cardError.count()).toBe(0);
      expect(await cardUrl.getAttribute('aria-invalid')).toBeNull();
      await stripeSecret.fill('whsec_short');
      await page.getByRole('button', { name: 'Set signing secret' }).click();
      const secretError = page.locator('#stripe_webhook_secret-error');
      await secretError.waitFor();
      // Its own route (PUT .../settings/stripe-webhook-secret, stripe:write) names the body's field `secret`.
      expect(await secretError.innerText()).toMatch(/^secret: /);
      expect(await description(stripeSecret)).toMatch(/secret: /);
      // Nothing of a refused change was kept.
      expect(await settings()).toMatchObject({
        card_update_url: null,
        allowed_origins: null,
        stripe_webhook_secret_set: false,
      });

      // Every setting changed through the page, and read back through the API.
      await origins.fill('https://app.example.com\n\n  http://localhost:5173  \n');
      await hmac.check();
      await save.click();
      await page.getByRole('status').filter({ hasText: 'Integration settings saved.' }).waitFor();
      expect(await settings()).toMatchObject({
        card_update_url: 'https://pay.example.com/card',
        hmac_required: true,
        allowed_origins: ['https://app.example.com', 'http://localhost:5173'],
        stripe_webhook_secret_set: false,
      });
      expect(await save.isDisabled()).toBe(true);
      await stripeSecret.fill(secret);
      await page.getByRole('button', { name: 'Set signing secret' }).click();
      await page.getByRole('status').filter({ hasText: 'Stripe signing secret set.' }).waitFor();
      await page.getByText('A signing secret is set').waitFor();
      expect((await settings()).stripe_webhook_secret_set).toBe(true);
      // Stripe's deliveries are verified with it now; another secret's are refused.
      expect(await stripe(secret)).toBe(200);
      expect(await stripe('whsec_not_the_one_0123456789abcdef')).toBe(400);
      // Write-only: not kept by the page, never shown back.
      expect(await page.getByLabel('New Stripe signing secret').inputValue()).toBe('');
      expect(await page.getByRole('button', { name: 'Replace signing secret' }).isDisabled()).toBe(true);
      const everything = await page.evaluate(
        () => document.documentElement.outerHTML + JSON.stringify({ ...sessionStorage, ...localStorage }),
      );
      expect(everything).not.toContain(secret);

      // The health page names the key that set it (and no key for the operator's changes).
      await page.goto(`${service.url}/console/t/initech/health`);
      const card = page.getByRole('region', { name: 'Stripe signing secret', exact: true });
      await card.waitFor();
      await card
        .getByText(`(${key.slice(0, 12)}…)`)
        .first()
        .waitFor();
      expect(await card.getByRole('row').count()).toBe(2);
      expect(await card.innerText()).toContain('Last changed');
      await page.goto(`${service.url}/console/t/initech/settings`);

      // A fresh page shows what the service holds; then each is cleared through it.
      await page.reload();
      await page.getByRole('heading', { name: 'Integration' }).waitFor();
      await expect.poll(() => cardUrl.inputValue()).toBe('https://pay.example.com/card');
      expect(await hmac.isChecked()).toBe(true);
      expect(await origins.inputValue()).toBe('https://app.example.com\nhttp://localhost:5173');
      await cardUrl.fill('');
      await hmac.uncheck();
      await origins.fill('');
      await save.click();
      await page.getByRole('status').filter({ hasText: 'Integration settings saved.' }).waitFor();
      expect(await settings()).toMatchObject({
        card_update_url: null,
        hmac_required: false,
        allowed_origins: null,
        stripe_webhook_secret_set: true,
      });
      await noSeriousViolation(page);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }

    // The operator changes them too, on the tenant's address.
    const operator = await consolePage(browser);
    try {
      await signIn(operator.page, service.url, service.adminToken);
      await operator.page.goto(`${service.url}/console/t/initech/settings`);
      await operator.page.getByRole('heading', { name: 'Integration' }).waitFor();
      await operator.page.getByText('A signing secret is set').waitFor();
      await operator.page
        .getByRole('textbox', { name: 'Card update URL' })
        .fill('https://billing.initech.example/card');
      await operator.page.getByRole('button', { name: 'Save integration settings' }).click();
      await operator.page.getByRole('status').filter({ hasText: 'Integration settings saved.' }).waitFor();
      expect((await settings()).card_update_url).toBe('https://billing.initech.example/card');
      expect(operator.problems).toEqual([]);
    } finally {
      await operator.close();
    }
  });
});

import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, FrameLocator, Page } from 'playwright-core';
import { axeViolations, consolePage, haveBrowser, launchChromium, PHONE, seedTenant, shot, signIn, startConsoleService } from '../helpers/console-browser.js';
import type { ConsoleService } from '../helpers/console-browser.js';
import { Receiver } from '../helpers/receiver.js';
import { snippetTag } from '../helpers/snippet-browser.js';
import type { Tenant } from '../helpers/snippet-browser.js';
import { event, invoice } from '../helpers/stripe-fixtures.js';

/**
 * The console's settings in Chromium: branding saved through the form, its preview (the
 * snippet itself, in a frame) showing what the snippet shows a real customer, the policy
 * with what it would change on a known state, a key created and shown once, scope hiding,
 * and a webhook endpoint created, its failed message retried through the page until the
 * receiver has it.
 */

const DAY_S = 86_400;
const ALL = ['status:read', 'subscribers:read', 'subscribers:write', 'settings:write', 'webhooks:write', 'keys:write'];

/** The banner's sentence and accent, the gate's title and accent, as the snippet drew them. */
async function drawn(root: Page | FrameLocator, state: 'warning' | 'lockout'): Promise<{ text: string; accent: string }> {
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
  return { text: await box.locator('#dw-title').innerText(), accent: await box.evaluate((e) => getComputedStyle(e).borderTopColor) };
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
      startConsoleService({ DUNWALL_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true', DUNWALL_WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' }),
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
      events: [event('invoice.payment_failed', invoice('cus_old_warning', { next_payment_attempt: now + DAY_S }), { created: now - 3 * DAY_S })],
    });
    fullKey = await service.key('acme', ALL);
    readKey = await service.key('acme', ['subscribers:read']);
    // A plain page of the tenant's app with the snippet, for a customer given in the address.
    pages = createServer((req, res) => {
      const customer = new URL(req.url ?? '/', 'http://x').searchParams.get('customer') ?? '';
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(`<!doctype html><html><body><h1>App</h1>${snippetTag(`${service.url}/snippet.js`, tenant, customer)}</body></html>`);
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
      await page.goto(`${service.url}/console/settings`);
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
      expect(await impact.innerText()).toMatch(/Now: 1 customer gated, 4 customers warned\. With this policy: 2 customers gated, 3 customers warned\./);
      await page.getByRole('button', { name: 'Save policy' }).click();
      await page.getByRole('status').filter({ hasText: 'Policy saved.' }).waitFor();
      const settings = (await (await fetch(`${service.url}/v1/settings`, { headers: { authorization: `Bearer ${fullKey}` } })).json()) as { policy: unknown };
      expect(settings.policy).toEqual({ enforcement: 'gate', grace_days: 0, escalate_after_days: 2 });
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('creates a key shown once, which then works with its bearer', async () => {
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, fullKey);
      await page.goto(`${service.url}/console/settings`);
      await page.getByRole('heading', { name: 'Secret keys' }).waitFor();
      await page.getByRole('heading', { name: 'Branding' }).waitFor();
      await page.getByRole('textbox', { name: 'Name (what it is for)' }).fill('billing backend');
      await page.getByRole('checkbox', { name: /settings:write/ }).check();
      await page.getByRole('button', { name: 'Create key' }).click();
      const secret = (await page.locator('.secret-value').innerText()).trim();
      expect(secret).toMatch(/^sk_test_[A-Za-z0-9]{40}$/);
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
      await page.goto(`${service.url}/console/settings`);
      await page.getByRole('heading', { name: 'Webhook endpoints' }).waitFor();
      await page.getByText('This needs the settings:write scope').waitFor();
      await page.getByText('This needs the keys:write scope').waitFor();
      await page.getByText('This needs the webhooks:write scope').waitFor();
      for (const name of ['Save branding', 'Save policy', 'Create key', 'Add endpoint']) expect(await page.getByRole('button', { name }).count(), name).toBe(0);
      // Nothing wider than the phone: tables scroll inside their regions.
      expect(await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)).toBeLessThanOrEqual(0);
      await shot(page, 'settings');
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
      await page.goto(`${service.url}/console/settings`);
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
});

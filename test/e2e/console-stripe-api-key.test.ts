import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import {
  axeViolations,
  consolePage,
  haveBrowser,
  launchChromium,
  shot,
  signIn,
  startConsoleService,
} from '../helpers/console-browser.js';
import type { ConsoleService } from '../helpers/console-browser.js';
import { startStripeStandin } from '../helpers/stripe-standin.js';
import type { StripeStandin } from '../helpers/stripe-standin.js';

/**
 * The console's form for the Stripe API key, in Chromium, against a service whose Stripe is
 * the stand-in (DUNWALL_STRIPE_API_URL): a key lacking the portal permission is refused with
 * that permission named on the page and nothing kept; a good key is checked and saved, the
 * field emptied, the page and the API showing its prefix and date and never the key; Remove
 * takes it away. A key without stripe:write sees the field disabled with the reason.
 */
const GOOD = `rk_live_${'G0o0D1k2'.repeat(6)}`;
const NO_PORTAL = `rk_live_${'N0p1O2r3'.repeat(6)}`;

describe.skipIf(!haveBrowser)('the console: the Stripe API key', () => {
  let service: ConsoleService;
  let browser: Browser;
  let standin: StripeStandin;

  beforeAll(async () => {
    standin = await startStripeStandin(
      { subscriptions: [], invoices: [], invoicePayments: [], paymentIntents: [], charges: [] },
      {
        keys: {
          [GOOD]: [
            'rak_invoice_read',
            'rak_customer_read',
            'rak_subscription_read',
            'rak_billing_portal_session_write',
          ],
          [NO_PORTAL]: ['rak_invoice_read', 'rak_customer_read', 'rak_subscription_read'],
        },
      },
    );
    [service, browser] = await Promise.all([
      startConsoleService({ DUNWALL_STRIPE_API_URL: standin.url }),
      launchChromium(),
    ]);
    await service.admin('POST', '/tenants', { slug: 'acme' });
  });
  afterAll(async () => {
    await browser?.close();
    await service?.close();
    await standin?.close();
  });

  it('refuses a key naming the missing permission, saves a good one shown by its prefix only, and removes it', async () => {
    const key = await service.key('acme', ['settings:write', 'stripe:write']);
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, key);
      await page.goto(`${service.url}/console/t/acme/settings`);
      await page.getByRole('heading', { name: 'Stripe API key' }).waitFor();
      await page.getByText('No Stripe API key').waitFor();

      const field = page.getByRole('textbox', { name: 'Stripe API key', exact: true });
      await field.fill(NO_PORTAL);
      await page.getByRole('button', { name: 'Set Stripe API key' }).click();
      const refusal = page.getByText(/lacks Customer portal: write/);
      await refusal.waitFor();
      expect(await page.getByText('stripe_key_permission').count()).toBeGreaterThan(0);
      expect(((await service.admin('GET', '/tenants/acme')) as { stripe_api_key: unknown }).stripe_api_key).toBeNull();

      await field.fill(GOOD);
      await page.getByRole('button', { name: 'Set Stripe API key' }).click();
      await page.getByText(/^Key rk_live_G0o0… set /).waitFor();
      expect(await page.getByRole('textbox', { name: 'New Stripe API key' }).inputValue()).toBe('');
      expect(await page.content()).not.toContain(GOOD);
      const shown = (await service.admin('GET', '/tenants/acme')) as { stripe_api_key: { prefix: string } | null };
      expect(shown.stripe_api_key?.prefix).toBe('rk_live_G0o0');
      expect(standin.requests.filter((r) => r.key === GOOD)).toHaveLength(4);
      await shot(page, 'stripe-api-key');
      expect(JSON.stringify(await axeViolations(page), null, 1)).toBe('[]');

      await page.getByRole('button', { name: 'Remove' }).click();
      await page.getByText('No Stripe API key').waitFor();
      expect(((await service.admin('GET', '/tenants/acme')) as { stripe_api_key: unknown }).stripe_api_key).toBeNull();
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('shows a key without stripe:write the field disabled, and why', async () => {
    const key = await service.key('acme', ['settings:write']);
    const { page, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, key);
      await page.goto(`${service.url}/console/t/acme/settings`);
      const field = page.getByRole('textbox', { name: 'Stripe API key', exact: true });
      await field.waitFor();
      expect(await field.isDisabled()).toBe(true);
      expect(await page.getByRole('button', { name: /Stripe API key/ }).count()).toBe(0);
      await page.getByText('Setting the Stripe API key needs the stripe:write scope').waitFor();
    } finally {
      await close();
    }
  });
});
